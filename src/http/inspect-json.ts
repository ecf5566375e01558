import { ServiceError } from "../errors/service-error.js";

/**
 * Nesting deeper than this is refused before parsing. OpenAI's own bodies
 * (tool schemas, Responses input) stay far below it; V8's JSON.parse spent
 * seconds on a body of millions of nested arrays, blocking every request.
 */
export const MAX_JSON_DEPTH = 128;

/** A JSON body, parsed, with what the raw-bytes pass learnt about it. */
export interface ParsedJson {
  value: unknown;
  /**
   * How many top-level keys a case-insensitive parser (Go's encoding/json)
   * would read as `model`: escapes decoded, any case. More than one means
   * parsers disagree on which model the body names.
   */
  modelKeys: number;
  /** The bytes that were parsed (a UTF-8 byte order mark dropped). */
  raw: Buffer;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const MODEL_TOKEN = Buffer.from('"model"');
/** `\u004X` and `\u006X` escape the letters of "model" (either case) and nothing common. */
const ESCAPED_UPPER = Buffer.from("\\u004");
const ESCAPED_LOWER = Buffer.from("\\u006");
/**
 * Bodies up to this size are walked at once: the walk costs less than the
 * native searches that could spare it (a 4 KB chat body walks in ~4 µs).
 */
const ALWAYS_WALK_BYTES = 16 * 1024;
/** A key folding to "model" is 5 characters, each at most a 6-byte `\uXXXX` escape. */
const MAX_RAW_MODEL_KEY = 5 * 6;

/**
 * Whether a key names `model` to a parser that matches keys as Go's
 * encoding/json does (Unicode simple case folding). Only `k` and `s` among
 * ASCII letters share a fold with a non-ASCII character (the Kelvin sign,
 * the long s), so for "model" folding is ASCII case-insensitivity.
 */
export function foldsToModel(key: string): boolean {
  return key.length === 5 && key.toLowerCase() === "model";
}

/**
 * Parses a JSON body after one pass over its raw bytes that (1) refuses
 * nesting deeper than `maxDepth` before JSON.parse can spend seconds on it
 * and (2) counts the top-level keys naming `model` in any spelling.
 *
 * The pass is cheap: small bodies are walked (string contents skipped with
 * native searches); larger ones only when a native search finds more
 * brackets than `maxDepth`, a second `"model"` token, or an escaped letter
 * of "model". Otherwise the parsed object's own keys tell everything
 * (JSON.parse merges only exact duplicates, which a single `"model"` token
 * rules out).
 * @throws ServiceError `invalid_json` (not JSON) or `invalid_value` (too deep)
 */
export function parseJson(buf: Buffer, maxDepth = MAX_JSON_DEPTH): ParsedJson {
  const raw = buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? buf.subarray(3) : buf;
  const walked =
    raw.length <= ALWAYS_WALK_BYTES || mayNestDeeperThan(raw, maxDepth) || mayNameModelTwice(raw)
      ? walkJson(raw, maxDepth)
      : undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw.toString("utf8"));
  } catch {
    throw new ServiceError("invalid_json", "The request body is not valid JSON.");
  }
  return { value, modelKeys: walked ?? countModelKeys(value), raw };
}

/** True unless the body has at most `maxDepth` opening brackets in all (in strings too). */
function mayNestDeeperThan(buf: Buffer, maxDepth: number): boolean {
  let openers = 0;
  for (const opener of [OPEN_OBJECT, OPEN_ARRAY]) {
    for (let i = buf.indexOf(opener); i !== -1; i = buf.indexOf(opener, i + 1)) {
      if (++openers > maxDepth) return true;
    }
  }
  return false;
}

/** True if the bytes hold `"model"` twice or an escaped letter of it: only a walk can tell. */
function mayNameModelTwice(buf: Buffer): boolean {
  const first = buf.indexOf(MODEL_TOKEN);
  if (first !== -1 && buf.indexOf(MODEL_TOKEN, first + MODEL_TOKEN.length) !== -1) return true;
  return buf.indexOf(ESCAPED_UPPER) !== -1 || buf.indexOf(ESCAPED_LOWER) !== -1;
}

function countModelKeys(value: unknown): number {
  if (!value || typeof value !== "object" || Array.isArray(value)) return 0;
  let count = 0;
  for (const key of Object.keys(value)) if (foldsToModel(key)) count += 1;
  return count;
}

/**
 * Walks the structure of (valid or not) JSON bytes: strings are skipped with
 * a native search for their closing quote, so large string values cost
 * little. Counts the top-level object's keys that fold to `model`.
 * @throws ServiceError `invalid_value` past `maxDepth`
 */
export function walkJson(buf: Buffer, maxDepth: number): number {
  const n = buf.length;
  let depth = 0;
  let topIsObject = false;
  let keyNext = false;
  let modelKeys = 0;
  let i = 0;
  while (i < n) {
    const c = buf[i] as number;
    if (c === QUOTE) {
      const end = stringEnd(buf, i + 1);
      // Unterminated: JSON.parse reports it, fast, as there is no nesting left to walk.
      if (end === -1) break;
      if (keyNext && depth === 1) {
        if (keyFoldsToModel(buf, i + 1, end)) modelKeys += 1;
        keyNext = false;
      }
      i = end + 1;
      continue;
    }
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      depth += 1;
      if (depth > maxDepth) {
        throw new ServiceError(
          "invalid_value",
          `The request body nests JSON deeper than ${maxDepth} levels.`,
        );
      }
      if (depth === 1 && c === OPEN_OBJECT) {
        topIsObject = true;
        keyNext = true;
      }
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      depth -= 1;
    } else if (c === COMMA && depth === 1 && topIsObject) {
      keyNext = true;
    }
    i += 1;
  }
  return modelKeys;
}

/** Index of the quote closing a string whose content starts at `from`, or -1. */
function stringEnd(buf: Buffer, from: number): number {
  // Most strings are short: a plain loop beats a native call for them.
  const stop = Math.min(from + 16, buf.length);
  for (let j = from; j < stop; j += 1) {
    const c = buf[j];
    if (c === QUOTE) return j;
    if (c === BACKSLASH) break;
  }
  let j = from;
  for (;;) {
    j = buf.indexOf(QUOTE, j);
    if (j === -1) return -1;
    let k = j - 1;
    while (k >= from && buf[k] === BACKSLASH) k -= 1;
    if ((j - 1 - k) % 2 === 0) return j;
    j += 1;
  }
}

function keyFoldsToModel(buf: Buffer, start: number, end: number): boolean {
  const length = end - start;
  if (length === 5) return foldsToModel(buf.toString("latin1", start, end));
  if (length > MAX_RAW_MODEL_KEY) return false;
  const escape = buf.indexOf(BACKSLASH, start);
  if (escape === -1 || escape >= end) return false;
  try {
    return foldsToModel(JSON.parse(buf.toString("utf8", start - 1, end + 1)) as string);
  } catch {
    return false;
  }
}
