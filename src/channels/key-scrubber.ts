/** What a channel key is replaced with wherever it shows up. */
export const REDACTED = "[redacted]";
const REDACTED_BYTES = Buffer.from(REDACTED);
/** What masks a key where the length must stay (`*`). */
const MASK = 0x2a;
/** Shorter keys would match ordinary text; they are not scrubbed. */
export const MIN_SCRUBBED_KEY_LENGTH = 8;

const BACKSLASH = 0x5c;
const LOWER_U = 0x75;
const NO_MATCH = -1;
const PARTIAL = -2;

/** One character of the key and the bytes that may spell it. */
interface KeyUnit {
  /** The character's own UTF-8 bytes. */
  literal: Buffer;
  /** Lower-case hex digits of its `\uXXXX` escape(s), 4 per UTF-16 unit. */
  hex: number[];
  /** The byte after a backslash in its short JSON escape (`\/`, `\"`, `\\`). */
  short?: number;
}

/**
 * Finds a channel key in bytes in every spelling a JSON encoder or an echo
 * may give it: literal, with `\/`, `\"` or `\\` escapes, or with any of its
 * characters as `\uXXXX` in either hex case, mixed freely. Used on error
 * bodies, success bodies, streams and response headers.
 */
export interface KeyScrubber {
  /** The bytes with every spelling of the key replaced; the same buffer when clean. */
  scrub(bytes: Buffer): Buffer;
  /** The same, for a header value (latin1, as headers are). */
  scrubText(text: string): string;
  /**
   * A string already decoded from JSON (its escapes undone): the literal key
   * is all there is to find, and the text keeps every character.
   */
  scrubString(text: string): string;
  /**
   * A scrubber for one stream. Each chunk comes back at once, scrubbed; only
   * when a chunk ends in what could be the start of the key are those few
   * bytes held for the next chunk, so a stream is neither delayed nor
   * re-chunked in practice (SSE chunks end in a newline). With `keepLength`
   * every spelling is masked by as many `*` as it has bytes, so a body sent
   * on with its `Content-Length` keeps it.
   */
  stream(keepLength?: boolean): StreamScrubber;
}

/** See {@link KeyScrubber.stream}. */
export interface StreamScrubber {
  push(chunk: Buffer): Buffer;
  /** Whatever was held back, at the end of the stream. */
  flush(): Buffer;
}

const IDENTITY: KeyScrubber = {
  scrub: (bytes) => bytes,
  scrubText: (text) => text,
  scrubString: (text) => text,
  stream: () => ({ push: (chunk) => chunk, flush: () => EMPTY }),
};
const EMPTY = Buffer.alloc(0);

function hexDigits(unit: number): number[] {
  return [...unit.toString(16).padStart(4, "0")].map((digit) => digit.charCodeAt(0));
}

function unitsOf(key: string): KeyUnit[] {
  return [...key].map((char) => {
    const hex: number[] = [];
    for (let i = 0; i < char.length; i += 1) hex.push(...hexDigits(char.charCodeAt(i)));
    const short = char === "/" ? 0x2f : char === '"' ? 0x22 : char === "\\" ? BACKSLASH : undefined;
    return { literal: Buffer.from(char), hex, short };
  });
}

/** Builds the scrubber of one key; keys shorter than {@link MIN_SCRUBBED_KEY_LENGTH} are left alone. */
export function createKeyScrubber(key: string | undefined): KeyScrubber {
  if (!key || key.length < MIN_SCRUBBED_KEY_LENGTH) return IDENTITY;
  const pattern = patternOf(key);
  // Own functions, not methods: callers hand `scrubText` on unbound.
  return {
    scrub: (bytes) => scrub(pattern, bytes),
    scrubText: (text) => scrubText(pattern, text),
    scrubString: (text) => (text.includes(key) ? text.split(key).join(REDACTED) : text),
    stream: (keepLength = false) => new KeyStreamScrubber(pattern, keepLength),
  };
}

/** One key, prepared for searching bytes. */
interface KeyPattern {
  key: string;
  units: KeyUnit[];
  literalKey: Buffer;
  firstByte: number;
  /** Longest spelling: every character escaped. */
  maxLength: number;
}

function patternOf(key: string): KeyPattern {
  const units = unitsOf(key);
  return {
    key,
    units,
    literalKey: Buffer.from(key),
    firstByte: (units[0] as KeyUnit).literal[0] as number,
    maxLength: units.reduce(
      (sum, unit) => sum + Math.max(unit.literal.length, (unit.hex.length / 4) * 6),
      0,
    ),
  };
}

function scrub(pattern: KeyPattern, bytes: Buffer): Buffer {
  // Every spelling but the literal one has a backslash in it.
  if (bytes.indexOf(BACKSLASH) === -1 && bytes.indexOf(pattern.literalKey) === -1) return bytes;
  return replaceAll(pattern, bytes, false).out;
}

function scrubText(pattern: KeyPattern, text: string): string {
  if (!text.includes("\\") && !text.includes(pattern.key)) return text;
  const bytes = Buffer.from(text, "latin1");
  const scrubbed = scrub(pattern, bytes);
  return scrubbed === bytes ? text : scrubbed.toString("latin1");
}

/** See {@link KeyScrubber.stream}: a key split across chunks is held until it is whole. */
class KeyStreamScrubber implements StreamScrubber {
  private carry: Buffer | undefined;

  constructor(
    private readonly pattern: KeyPattern,
    private readonly keepLength: boolean,
  ) {}

  push(chunk: Buffer): Buffer {
    const { pattern } = this;
    const bytes = this.carry ? Buffer.concat([this.carry, chunk]) : chunk;
    this.carry = undefined;
    // Only the last few bytes can start a spelling the next chunk completes.
    const tailStart = Math.max(0, bytes.length - pattern.maxLength);
    const clean =
      bytes.indexOf(BACKSLASH) === -1 &&
      bytes.indexOf(pattern.literalKey) === -1 &&
      bytes.indexOf(pattern.firstByte, tailStart) === -1;
    if (clean) return bytes;
    const { out, held } = replaceAll(pattern, bytes, true, this.keepLength);
    if (held !== -1) this.carry = bytes.subarray(held);
    return out;
  }

  flush(): Buffer {
    const rest = this.carry ?? EMPTY;
    this.carry = undefined;
    return rest;
  }
}

/** End of a spelling of the key starting at `at`, or NO_MATCH, or PARTIAL (bytes ran out). */
function matchAt({ units }: KeyPattern, bytes: Buffer, at: number): number {
  const n = bytes.length;
  let p = at;
  for (const unit of units) {
    if (p >= n) return PARTIAL;
    const c = bytes[p] as number;
    if (c === BACKSLASH && unit.literal[0] !== BACKSLASH) {
      if (p + 1 >= n) return PARTIAL;
      const kind = bytes[p + 1] as number;
      if (kind === unit.short) {
        p += 2;
        continue;
      }
      if (kind !== LOWER_U) return NO_MATCH;
      // One `\uXXXX` per UTF-16 unit (two for a character outside the BMP).
      for (let e = 0; e < unit.hex.length / 4; e += 1) {
        if (e > 0) {
          if (p >= n) return PARTIAL;
          if (bytes[p] !== BACKSLASH) return NO_MATCH;
          if (p + 1 >= n) return PARTIAL;
          if (bytes[p + 1] !== LOWER_U) return NO_MATCH;
        }
        for (let d = 0; d < 4; d += 1) {
          if (p + 2 + d >= n) return PARTIAL;
          const got = bytes[p + 2 + d] as number;
          const want = unit.hex[e * 4 + d] as number;
          if (got !== want && !(want >= 0x61 && got === want - 0x20)) return NO_MATCH;
        }
        p += 6;
      }
      continue;
    }
    for (let b = 0; b < unit.literal.length; b += 1) {
      if (p + b >= n) return PARTIAL;
      if (bytes[p + b] !== unit.literal[b]) return NO_MATCH;
    }
    p += unit.literal.length;
  }
  return p;
}

/**
 * Replaces every full spelling; with `holdPartial`, also returns where a
 * spelling that the bytes end in the middle of starts (else -1).
 */
function replaceAll(
  pattern: KeyPattern,
  bytes: Buffer,
  holdPartial: boolean,
  keepLength = false,
): { out: Buffer; held: number } {
  const { firstByte } = pattern;
  const parts: Buffer[] = [];
  let copied = 0;
  let held = -1;
  let nextLiteral = bytes.indexOf(firstByte);
  let nextEscape = bytes.indexOf(BACKSLASH);
  while (nextLiteral !== -1 || nextEscape !== -1) {
    const at =
      nextEscape === -1 || (nextLiteral !== -1 && nextLiteral < nextEscape)
        ? nextLiteral
        : nextEscape;
    const end = at >= copied ? matchAt(pattern, bytes, at) : NO_MATCH;
    let resume = at + 1;
    if (end >= 0) {
      parts.push(
        bytes.subarray(copied, at),
        keepLength ? Buffer.alloc(end - at, MASK) : REDACTED_BYTES,
      );
      copied = end;
      resume = end;
    } else if (end === PARTIAL && holdPartial) {
      held = at;
      break;
    }
    if (nextLiteral !== -1 && nextLiteral < resume) nextLiteral = bytes.indexOf(firstByte, resume);
    if (nextEscape !== -1 && nextEscape < resume) nextEscape = bytes.indexOf(BACKSLASH, resume);
  }
  const stop = held === -1 ? bytes.length : held;
  if (parts.length === 0) return { out: held === -1 ? bytes : bytes.subarray(0, stop), held };
  parts.push(bytes.subarray(copied, stop));
  return { out: Buffer.concat(parts), held };
}
