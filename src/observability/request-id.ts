import { randomUUID } from "node:crypto";

/** What a request id may be: 1 to 128 characters of `[A-Za-z0-9._:-]`. */
const SANE = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The request's id: its `X-Request-Id` when it is sane (an ingress or a
 * client may set one, and following it across hops is the point), else a new
 * one. Never a value that could break a log line or a header.
 */
export function requestIdOf(header: string | string[] | undefined): string {
  return typeof header === "string" && SANE.test(header) ? header : randomUUID();
}
