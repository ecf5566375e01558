import { drawRandom, randomPool } from "../ids/random-pool.js";

/** What a request id may be: 1 to 128 characters of `[A-Za-z0-9._:-]`. */
const SANE = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The request's id: its `X-Request-Id` when it is sane (an ingress or a
 * client may set one, and following it across hops is the point), else a new
 * one. Never a value that could break a log line or a header.
 */
export function requestIdOf(header: string | string[] | undefined): string {
  return typeof header === "string" && SANE.test(header) ? header : newRequestId();
}

// The id's text, written in place and read as one flat string.
const text = Buffer.allocUnsafe(36);
const HEX_DIGITS = Buffer.from("0123456789abcdef");
const DASH = 0x2d;

/**
 * A random UUID (version 4), as `crypto.randomUUID` writes one: its bytes written
 * as text into a buffer and read as one flat string, which costs about half of
 * `randomUUID`'s string concatenations and the flattening every later use of
 * those needed (an id is quoted in the access line and set as a header).
 */
export function newRequestId(): string {
  const at = drawRandom(16);
  let p = 0;
  for (let i = 0; i < 16; i += 1) {
    let byte = randomPool[at + i] as number;
    // Version 4, and variant 10xx (RFC 9562), as randomUUID sets them.
    if (i === 6) byte = (byte & 0x0f) | 0x40;
    else if (i === 8) byte = (byte & 0x3f) | 0x80;
    if (i === 4 || i === 6 || i === 8 || i === 10) text[p++] = DASH;
    text[p++] = HEX_DIGITS[byte >> 4] as number;
    text[p++] = HEX_DIGITS[byte & 0x0f] as number;
  }
  return text.toString("latin1", 0, 36);
}
