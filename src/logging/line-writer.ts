import { pino, type Logger } from "pino";

/** A field's value; undefined ones are left out of the line, as pino leaves them out. */
export type LineValue = string | number | boolean | undefined;

/**
 * Writes one line at `level` whose fields are `values`, in the order of the
 * writer's keys (see {@link createLineWriter}).
 */
export type LineWriter = (
  level: "info" | "debug",
  values: readonly LineValue[],
  msg: string,
) => void;

/** The parts of a pino logger a line is made of (pino exports these symbols for such use). */
export interface LoggerParts {
  levelPrefix: (level: number) => string | undefined;
  time: () => string;
  bindings: string;
  end: string;
  write: (line: string) => void;
}

/**
 * Writes lines for `logger` exactly as pino formats them (its level prefix,
 * time, the logger's bindings, the fields, `msg`), to the same destination
 * through the same `streamWrite` hook (the scrubbing of the configuration's
 * secrets), but without pino's generic per-field work: serializers,
 * redaction and a safe stringify per value cost more than the rest of a
 * passthrough request. Only for lines whose every field the service fills in
 * itself (access lines: no header, body or error object). Falls back to
 * `logger[level]` for a logger it cannot match (mixins, a stream that wants
 * metadata, a renamed message key).
 */
export function createLineWriter(
  logger: Logger,
  keys: readonly string[],
  options: LineWriterOptions = {},
): LineWriter {
  const parts = partsOf(logger);
  if (!parts) {
    return (level, values, msg) =>
      logger[level](Object.fromEntries(keys.map((key, i) => [key, values[i]])), msg);
  }
  const levels = { info: logger.levels.values.info, debug: logger.levels.values.debug };
  const heads = keys.map((key) => `,${JSON.stringify(key)}:`);
  const repeating = new Set(options.repeating);
  // Each string field as its whole piece (`,"key":"value"`): a remembered one is one flat
  // string, so the line is half as many pieces to concatenate and to flatten when written.
  const pieces = heads.map((head, i): Quoter => {
    if (repeating.has(keys[i] as string)) return createQuoteMemory(head);
    return (text) => head + quote(text);
  });
  const tail = createQuoteMemory(',"msg":', parts.end);
  return (level, values, msg) => {
    let line = (parts.levelPrefix(levels[level] ?? 30) ?? "{") + parts.time() + parts.bindings;
    for (let i = 0; i < heads.length; i += 1) {
      const value = values[i];
      if (value === undefined) continue;
      line += typeof value === "string" ? (pieces[i] as Quoter)(value) : heads[i] + String(value);
    }
    parts.write(line + tail(msg));
  };
}

/** Options of {@link createLineWriter}. */
export interface LineWriterOptions {
  /**
   * Keys whose values come from a small set (a method, a route, a key's
   * name, a model): each value's piece of the line (`,"key":"value"`) is
   * remembered, which costs a lookup where quoting costs a test and three
   * concatenations (and their flattening when the line is written). Default:
   * none.
   */
  repeating?: readonly string[];
}

type Quoter = (text: string) => string;

/** How many values of one key are remembered quoted, at most; later ones are quoted each time. */
const MAX_REMEMBERED = 256;
/** The longest value remembered: a client's made-up model name is not kept whole. */
const MAX_REMEMBERED_LENGTH = 128;

/**
 * {@link quote} between `before` and `after`, remembering the first
 * {@link MAX_REMEMBERED} short values' pieces, each as one flat string.
 */
function createQuoteMemory(before: string, after = ""): Quoter {
  const known = new Map<string, string>();
  return (text) => {
    let piece = known.get(text);
    if (piece !== undefined) return piece;
    if (known.size >= MAX_REMEMBERED || text.length > MAX_REMEMBERED_LENGTH) {
      return before + quote(text) + after;
    }
    // Remembered from a copy: `text` may be a slice of a larger string (a header's value),
    // which a remembered slice, or a piece made of it, would keep alive whole.
    const copy = ` ${text}`.slice(1);
    // Joined, not concatenated: a new flat string, where `+` would keep three linked pieces.
    piece = [before, quote(copy), after].join("");
    known.set(copy, piece);
    return piece;
  };
}

/** Printable ASCII but `"` and `\\`: a JSON string as it is written. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** `text` as a JSON string; most need no escaping, and a test is cheaper than JSON.stringify. */
export function quote(text: string): string {
  return PLAIN.test(text) ? `"${text}"` : JSON.stringify(text);
}

/**
 * What a line of `logger` is made of, when pino's own formatting adds nothing
 * to it; undefined for a logger with a mixin, a stream that wants metadata or
 * a renamed message key.
 */
export function partsOf(logger: Logger): LoggerParts | undefined {
  const s = pino.symbols;
  const own = logger as unknown as Record<symbol, unknown>;
  const cache = own[s.lsCacheSym] as Record<number, string> | undefined;
  const time = own[s.timeSym];
  const bindings = own[s.chindingsSym];
  const end = own[s.endSym];
  const stream = own[s.streamSym] as
    { write?: (line: string) => unknown; [key: symbol]: unknown } | undefined;
  const hooks = own[s.hooksSym] as { streamWrite?: (line: string) => string } | undefined;
  const plain =
    cache !== undefined &&
    typeof time === "function" &&
    typeof bindings === "string" &&
    typeof end === "string" &&
    typeof stream?.write === "function" &&
    !own[s.mixinSym] &&
    stream[s.needsMetadataGsym] !== true &&
    own[s.messageKeySym] === "msg";
  if (!plain || !stream?.write) return undefined;
  const write = stream.write.bind(stream);
  const hook = hooks?.streamWrite;
  return {
    levelPrefix: (level) => cache[level],
    time: () => (time as () => string).call(logger),
    bindings,
    end,
    write: hook ? (line) => write(hook(line)) : write,
  };
}
