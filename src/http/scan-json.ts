import { foldsToModel } from "./inspect-json.js";

/**
 * What {@link scanJson} found in a JSON text: where the top-level object's
 * members of interest are, without building any of it.
 */
export interface ScannedJson {
  /** Whether the text is an object (members are found only then). */
  readonly isObject: boolean;
  /**
   * By the index of a wanted name: where the value of its last member starts
   * (as JSON.parse keeps the last of duplicate keys), -1 when there is none.
   */
  readonly starts: readonly number[];
  /** By the same index: where that value ends. */
  readonly ends: readonly number[];
  /** Top-level keys that name `model` in any case (see `foldsToModel`). */
  readonly modelKeys: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const MINUS = 0x2d;
const ZERO = 0x30;
const NINE = 0x39;
/** A failed scan: not JSON, or nothing this scanner decides (too deep). */
const FAIL = -1;

/** JSON's whitespace: space, tab, line feed, carriage return. */
const SPACE = new Uint8Array(256);
SPACE[0x20] = SPACE[0x09] = SPACE[0x0a] = SPACE[0x0d] = 1;

/** Bytes that may follow a backslash besides `u`. */
const SHORT_ESCAPE = new Uint8Array(256);
for (const c of '"\\/bfnrt') SHORT_ESCAPE[c.charCodeAt(0)] = 1;

const HEX = new Uint8Array(256);
for (const c of "0123456789abcdefABCDEF") HEX[c.charCodeAt(0)] = 1;

/** One scan's state: the bytes, and what the top-level object's members were. */
class Scan implements ScannedJson {
  isObject = false;
  readonly starts: number[];
  readonly ends: number[];
  modelKeys = 0;

  constructor(
    readonly bytes: Buffer,
    readonly names: readonly string[],
    readonly maxDepth: number,
  ) {
    this.starts = names.map(() => -1);
    this.ends = names.map(() => -1);
  }
}

/**
 * Checks that `bytes` are one JSON text, exactly as `JSON.parse` of their
 * UTF-8 decoding would accept it (strict RFC 8259: no comments, no trailing
 * commas, no byte order mark, no control characters in strings), and finds
 * the top-level object's members named in `names` and the keys naming
 * `model`, without making a value: a JSON body or answer that is only passed
 * on costs a walk over its bytes instead of a parse into objects.
 *
 * `undefined` when the bytes are not JSON, or nest deeper than `maxDepth`
 * (the scan then decides nothing): the caller parses them the usual way,
 * which gives the error it always gave. Bytes of 0x80 and up in strings are
 * accepted, as the decoding turns invalid UTF-8 into U+FFFD and JSON.parse
 * takes any character in a string.
 */
export function scanJson(
  bytes: Buffer,
  names: readonly string[],
  maxDepth: number,
): ScannedJson | undefined {
  const scan = new Scan(bytes, names, maxDepth);
  const n = bytes.length;
  const start = skipSpace(bytes, 0);
  scan.isObject = bytes[start] === OPEN_OBJECT;
  const end = scan.isObject ? topObject(scan, start) : value(scan, start, 1);
  if (end === FAIL || skipSpace(bytes, end) !== n) return undefined;
  return scan;
}

/**
 * A member's value as JSON.parse would give it, read from its span: numbers
 * and strings without escapes directly, anything else through JSON.parse.
 */
export function valueAt(bytes: Buffer, start: number, end: number): unknown {
  const first = bytes[start] as number;
  if (first === QUOTE) {
    if (!hasEscape(bytes, start + 1, end - 1)) return bytes.toString("utf8", start + 1, end - 1);
  } else if (first === MINUS || (first >= ZERO && first <= NINE)) {
    return Number(bytes.toString("latin1", start, end));
  }
  return JSON.parse(bytes.toString("utf8", start, end));
}

function skipSpace(bytes: Buffer, from: number): number {
  let i = from;
  while (i < bytes.length && SPACE[bytes[i] as number] === 1) i += 1;
  return i;
}

/** The top-level object, whose keys are matched against the wanted names. */
function topObject(scan: Scan, from: number): number {
  const { bytes } = scan;
  let i = skipSpace(bytes, from + 1);
  if (bytes[i] === CLOSE_OBJECT) return i + 1;
  for (;;) {
    if (bytes[i] !== QUOTE) return FAIL;
    const keyStart = i;
    i = string(bytes, i + 1);
    if (i === FAIL) return FAIL;
    const keyEnd = i;
    i = skipSpace(bytes, i);
    if (bytes[i] !== COLON) return FAIL;
    const valueStart = skipSpace(bytes, i + 1);
    i = value(scan, valueStart, 2);
    if (i === FAIL) return FAIL;
    noteMember(scan, keyStart, keyEnd, valueStart, i);
    i = skipSpace(bytes, i);
    const c = bytes[i];
    if (c === CLOSE_OBJECT) return i + 1;
    if (c !== COMMA) return FAIL;
    i = skipSpace(bytes, i + 1);
  }
}

/** Longest key looked at: a wanted name of 32 characters, each a 6-byte `\\uXXXX` escape. */
const MAX_KEY_BYTES = 32 * 6;

/** Records a top-level member whose key (quotes included) is `bytes[keyStart, keyEnd)`. */
function noteMember(scan: Scan, keyStart: number, keyEnd: number, start: number, end: number) {
  const { bytes } = scan;
  if (keyEnd - keyStart - 2 > MAX_KEY_BYTES) return;
  const key = hasEscape(bytes, keyStart + 1, keyEnd - 1)
    ? (JSON.parse(bytes.toString("utf8", keyStart, keyEnd)) as string)
    : bytes.toString("utf8", keyStart + 1, keyEnd - 1);
  if (foldsToModel(key)) scan.modelKeys += 1;
  const at = scan.names.indexOf(key);
  if (at !== -1) {
    scan.starts[at] = start;
    scan.ends[at] = end;
  }
}

function hasEscape(bytes: Buffer, from: number, to: number): boolean {
  for (let i = from; i < to; i += 1) if (bytes[i] === BACKSLASH) return true;
  return false;
}

/** Any value starting at `from` (no space before it); its end, or FAIL. */
function value(scan: Scan, from: number, depth: number): number {
  const { bytes } = scan;
  const c = bytes[from];
  if (c === QUOTE) return string(bytes, from + 1);
  if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
    return depth > scan.maxDepth ? FAIL : container(scan, from, depth, c === OPEN_OBJECT);
  }
  if (c === MINUS || (c !== undefined && c >= ZERO && c <= NINE)) return number(bytes, from);
  if (c === 0x74) return literal(bytes, from, "true");
  if (c === 0x66) return literal(bytes, from, "false");
  if (c === 0x6e) return literal(bytes, from, "null");
  return FAIL;
}

/** An object or array below the top level; its members are not looked at. */
function container(scan: Scan, from: number, depth: number, isObject: boolean): number {
  const { bytes } = scan;
  const close = isObject ? CLOSE_OBJECT : CLOSE_ARRAY;
  let i = skipSpace(bytes, from + 1);
  if (bytes[i] === close) return i + 1;
  for (;;) {
    if (isObject) {
      if (bytes[i] !== QUOTE) return FAIL;
      i = string(bytes, i + 1);
      if (i === FAIL) return FAIL;
      i = skipSpace(bytes, i);
      if (bytes[i] !== COLON) return FAIL;
      i = skipSpace(bytes, i + 1);
    }
    i = value(scan, i, depth + 1);
    if (i === FAIL) return FAIL;
    i = skipSpace(bytes, i);
    const c = bytes[i];
    if (c === close) return i + 1;
    if (c !== COMMA) return FAIL;
    i = skipSpace(bytes, i + 1);
  }
}

/** A string whose content starts at `from`; the index past its closing quote, or FAIL. */
function string(bytes: Buffer, from: number): number {
  const n = bytes.length;
  let i = from;
  for (;;) {
    if (i >= n) return FAIL;
    const c = bytes[i] as number;
    if (c === QUOTE) return i + 1;
    if (c < 0x20) return FAIL;
    if (c !== BACKSLASH) {
      i += 1;
      continue;
    }
    const escape = bytes[i + 1] as number;
    if (escape === 0x75) {
      if (
        !isHex(bytes, i + 2) ||
        !isHex(bytes, i + 3) ||
        !isHex(bytes, i + 4) ||
        !isHex(bytes, i + 5)
      ) {
        return FAIL;
      }
      i += 6;
    } else if (SHORT_ESCAPE[escape] === 1) {
      i += 2;
    } else {
      return FAIL;
    }
  }
}

/** A number, as JSON writes them: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`. */
function number(bytes: Buffer, from: number): number {
  let i = from;
  if (bytes[i] === MINUS) i += 1;
  if (bytes[i] === ZERO) i += 1;
  else if (isDigit(bytes[i])) i = digits(bytes, i);
  else return FAIL;
  if (bytes[i] === 0x2e) {
    if (!isDigit(bytes[i + 1])) return FAIL;
    i = digits(bytes, i + 1);
  }
  if (bytes[i] === 0x65 || bytes[i] === 0x45) {
    i += 1;
    if (bytes[i] === 0x2b || bytes[i] === MINUS) i += 1;
    if (!isDigit(bytes[i])) return FAIL;
    i = digits(bytes, i);
  }
  return i;
}

function isHex(bytes: Buffer, at: number): boolean {
  return at < bytes.length && HEX[bytes[at] as number] === 1;
}

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= ZERO && c <= NINE;
}

function digits(bytes: Buffer, from: number): number {
  let i = from;
  while (isDigit(bytes[i])) i += 1;
  return i;
}

function literal(bytes: Buffer, from: number, word: string): number {
  for (let k = 1; k < word.length; k += 1) {
    if (bytes[from + k] !== word.charCodeAt(k)) return FAIL;
  }
  return from + word.length;
}
