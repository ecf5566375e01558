import { ServiceError } from "../../errors/service-error.js";
import { shorten } from "../../errors/shorten.js";
import { foldsToModel } from "../../http/inspect-json.js";

const CR = 0x0d;
const LF = 0x0a;
const SPACE = 0x20;
const TAB = 0x09;
const DASH = 0x2d;
const CRLF_CRLF = Buffer.from("\r\n\r\n");
/** Part headers beyond this are no form an SDK sends. */
const MAX_PART_HEADER_BYTES = 16 * 1024;
/** A model id is short; a longer `model` field is refused. */
const MAX_MODEL_BYTES = 1024;
/** An `n` field longer than this is no count (it is only read, never refused). */
const MAX_N_BYTES = 16;
/** Whitespace a sender may put after the closing delimiter. */
const MAX_EPILOGUE_BYTES = 1024;

const malformed = (why: string) =>
  new ServiceError("invalid_value", `The multipart form is malformed: ${why}.`);
const badModelField = (why: string) =>
  new ServiceError("invalid_value", `The form's 'model' field ${why}.`, { param: "model" });

type Phase = "start" | "delimiter" | "headers" | "body" | "epilogue";

/**
 * Reads the boundary of a `multipart/form-data` Content-Type, strictly: one
 * `boundary` parameter of 1 to 70 characters, so this service and the
 * channel cannot split the form differently.
 * @throws ServiceError `invalid_value`
 */
export function formBoundary(contentType: string): string {
  const [type, ...params] = contentType.split(";");
  if (type?.trim().toLowerCase() !== "multipart/form-data") {
    throw new ServiceError("invalid_value", "The request body must be multipart/form-data.");
  }
  const boundaries = params
    .map((param) => param.trim())
    .filter((param) => param.toLowerCase().startsWith("boundary="))
    .map((param) => param.slice("boundary=".length));
  const raw = boundaries[0];
  const value =
    raw?.startsWith('"') && raw.endsWith('"') && raw.length >= 2 ? raw.slice(1, -1) : raw;
  if (
    boundaries.length !== 1 ||
    !value ||
    value.length > 70 ||
    !/^[0-9A-Za-z'()+_,./:=? -]*[0-9A-Za-z'()+_,./:=?-]$/.test(value)
  ) {
    throw new ServiceError("invalid_value", "The multipart Content-Type needs one valid boundary.");
  }
  return value;
}

/** One part's headers, as far as the scanner cares. */
interface PartInfo {
  modelLike: boolean;
  exactModel: boolean;
  /** A text field named exactly `n`. */
  n?: boolean;
}

/**
 * Scans a `multipart/form-data` body as it streams past, chunk by chunk,
 * without keeping it: it finds the `model` field's value and refuses any
 * form that two parsers could read differently, so the model a channel
 * reads is the model that was checked. Refused, among others: a second
 * field whose name folds to `model` (in any case, percent- or
 * backslash-escaped, as RFC 2231 `name*`), a `model` file part or one with
 * a transfer encoding or a non-UTF-8 charset, a preamble, a boundary
 * string inside a part that is not a delimiter, bare CR or LF or folded
 * lines in part headers, and anything but whitespace after the end.
 */
export class FormScanner {
  private readonly delimiter: Buffer;
  private readonly first: Buffer;
  private phase: Phase = "start";
  private carry: Buffer | undefined;
  private part: PartInfo | undefined;
  private modelValue: Buffer[] = [];
  private modelBytes = 0;
  private modelFields = 0;
  private epilogueBytes = 0;
  /** Where scanning resumes when {@link step} needs more bytes. */
  private resumeAt = 0;
  private nValue: Buffer[] = [];
  private nBytes = 0;
  private nFields = 0;
  /** The `model` field's value, once its part is complete. */
  model: string | undefined;
  /** The `n` field's value, once its part is complete and only one was seen. */
  n: string | undefined;
  /** The closing delimiter was seen: the form is complete. */
  closed = false;

  /**
   * The form's `n` field, once the whole form was scanned: `undefined` when
   * it has none, `null` when that is not known yet, or it names `n` twice or
   * gives more than a count's bytes.
   */
  nField(): string | undefined | null {
    if (!this.closed) return null;
    if (this.nFields === 0) return undefined;
    return this.n ?? null;
  }

  constructor(boundary: string) {
    this.first = Buffer.from(`--${boundary}`);
    this.delimiter = Buffer.from(`\r\n--${boundary}`);
  }

  /**
   * Scans the next chunk.
   * @throws ServiceError `invalid_value` for a form this service will not pass on
   */
  push(chunk: Buffer): void {
    const bytes = this.carry ? Buffer.concat([this.carry, chunk]) : chunk;
    this.carry = undefined;
    let p = 0;
    while (p < bytes.length) {
      this.resumeAt = p;
      const next = this.step(bytes, p);
      if (next === -1) {
        // Too few bytes to decide: they wait for the next chunk.
        if (this.resumeAt < bytes.length) this.carry = bytes.subarray(this.resumeAt);
        return;
      }
      p = next;
    }
  }

  /**
   * The body ended: it must have been a complete form.
   * @throws ServiceError `invalid_value`
   */
  end(): void {
    if (!this.closed) throw malformed("it ends before its closing boundary");
  }

  /** Consumes from `p`; returns where to go on, or -1 when more bytes are needed. */
  private step(bytes: Buffer, p: number): number {
    switch (this.phase) {
      case "start": {
        if (bytes.length - p < this.first.length) return -1;
        if (!bytes.subarray(p, p + this.first.length).equals(this.first)) {
          throw malformed("it must start with its boundary");
        }
        this.phase = "delimiter";
        return p + this.first.length;
      }
      case "delimiter":
        return this.afterDelimiter(bytes, p);
      case "headers": {
        const end = bytes[p] === CR && bytes[p + 1] === LF ? p : bytes.indexOf(CRLF_CRLF, p);
        if (end === -1) {
          if (bytes.length - p > MAX_PART_HEADER_BYTES) throw malformed("part headers too long");
          return -1;
        }
        this.part = this.readPartHeaders(bytes.toString("latin1", p, end));
        this.phase = "body";
        return end === p ? p + 2 : end + 4;
      }
      case "body":
        return this.inBody(bytes, p);
      case "epilogue": {
        for (let i = p; i < bytes.length; i += 1) {
          const c = bytes[i];
          if (c !== CR && c !== LF && c !== SPACE && c !== TAB) {
            throw malformed("data after its closing boundary");
          }
        }
        this.epilogueBytes += bytes.length - p;
        if (this.epilogueBytes > MAX_EPILOGUE_BYTES) {
          throw malformed("data after its closing boundary");
        }
        return bytes.length;
      }
    }
  }

  /** After `--boundary`: `--` closes the form, optional blanks then CRLF open a part. */
  private afterDelimiter(bytes: Buffer, p: number): number {
    if (bytes.length - p < 2) return -1;
    if (bytes[p] === DASH && bytes[p + 1] === DASH) {
      this.closed = true;
      this.phase = "epilogue";
      return p + 2;
    }
    let q = p;
    while (q < bytes.length && (bytes[q] === SPACE || bytes[q] === TAB)) q += 1;
    if (q - p > 64) throw malformed("a boundary line is followed by other text");
    if (bytes.length - q < 2) return -1;
    if (bytes[q] !== CR || bytes[q + 1] !== LF) {
      throw malformed("its boundary string appears inside a part");
    }
    this.phase = "headers";
    return q + 2;
  }

  private inBody(bytes: Buffer, p: number): number {
    const found = bytes.indexOf(this.delimiter, p);
    if (found !== -1) {
      this.takeValue(bytes, p, found);
      this.finishPart();
      this.phase = "delimiter";
      return found + this.delimiter.length;
    }
    // Keep only a tail that could be the start of the delimiter.
    const keepFrom = this.partialDelimiterAt(
      bytes,
      Math.max(p, bytes.length - this.delimiter.length + 1),
    );
    this.takeValue(bytes, p, keepFrom);
    if (keepFrom === bytes.length) return bytes.length;
    this.resumeAt = keepFrom;
    return -1;
  }

  private partialDelimiterAt(bytes: Buffer, from: number): number {
    for (let i = bytes.indexOf(CR, from); i !== -1; i = bytes.indexOf(CR, i + 1)) {
      const tail = bytes.subarray(i);
      if (this.delimiter.subarray(0, tail.length).equals(tail)) return i;
    }
    return bytes.length;
  }

  private takeValue(bytes: Buffer, from: number, to: number): void {
    if (this.part?.n && to > from) {
      this.nBytes += to - from;
      if (this.nBytes <= MAX_N_BYTES) this.nValue.push(Buffer.from(bytes.subarray(from, to)));
      return;
    }
    if (!this.part?.exactModel || to <= from) return;
    this.modelBytes += to - from;
    if (this.modelBytes > MAX_MODEL_BYTES) throw badModelField("is too long");
    this.modelValue.push(Buffer.from(bytes.subarray(from, to)));
  }

  private finishPart(): void {
    const part = this.part;
    this.part = undefined;
    if (part?.n) {
      this.nFields += 1;
      this.n = this.nFields === 1 && this.nBytes <= MAX_N_BYTES ? latin1(this.nValue) : undefined;
      this.nValue = [];
      this.nBytes = 0;
    }
    if (!part?.exactModel) return;
    const value = Buffer.concat(this.modelValue);
    this.modelValue = [];
    try {
      this.model = new TextDecoder("utf-8", { fatal: true }).decode(value);
    } catch {
      throw badModelField("is not UTF-8 text");
    }
  }

  private readPartHeaders(block: string): PartInfo {
    const lines = block.length === 0 ? [] : block.split("\r\n");
    let disposition: string | undefined;
    let contentType: string | undefined;
    let transferEncoding = false;
    for (const line of lines) {
      if (/[\r\n]/.test(line) || line.startsWith(" ") || line.startsWith("\t")) {
        throw malformed("a part header has a bare line break or is folded");
      }
      const colon = line.indexOf(":");
      const name = colon > 0 ? line.slice(0, colon) : "";
      if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw malformed("a part header has no name");
      const value = line.slice(colon + 1).trim();
      switch (name.toLowerCase()) {
        case "content-disposition":
          if (disposition !== undefined)
            throw malformed("a part has two Content-Disposition headers");
          disposition = value;
          break;
        case "content-type":
          if (contentType !== undefined) throw malformed("a part has two Content-Type headers");
          contentType = value;
          break;
        case "content-transfer-encoding":
          transferEncoding = true;
          break;
      }
    }
    if (disposition === undefined) throw malformed("a part has no Content-Disposition");
    const { name, filename } = parseDisposition(disposition);
    const modelLike = foldsToModel(name) || foldsToModel(percentDecoded(name));
    if (!modelLike) return { modelLike, exactModel: false, n: name === "n" && !filename };
    this.modelFields += 1;
    if (this.modelFields > 1) throw badModelField("is given more than once");
    if (name !== "model") throw badModelField(`must be spelled 'model', not '${shorten(name)}'`);
    if (filename) throw badModelField("must be a text field, not a file");
    if (transferEncoding) throw badModelField("must not have a Content-Transfer-Encoding");
    if (
      contentType !== undefined &&
      !/^text\/plain\s*(;\s*charset="?utf-8"?\s*)?$/i.test(contentType)
    ) {
      throw badModelField("must be UTF-8 text");
    }
    return { modelLike, exactModel: true };
  }
}

/**
 * `form-data; name="..."; filename="..."`, strictly: a `name` parameter once,
 * without backslashes (parsers disagree on escapes) and without RFC 2231
 * `name*` variants (some parsers decode them into `name`).
 */
function parseDisposition(value: string): { name: string; filename?: string } {
  const match = /^form-data\s*(;.*)?$/i.exec(value);
  if (!match) throw malformed("a part is not form-data");
  let rest = match[1] ?? "";
  let name: string | undefined;
  let filename: string | undefined;
  while (rest.length > 0) {
    const param =
      /^;\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("[^"]*"|[!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*/.exec(
        rest,
      );
    if (!param) throw malformed("a part's Content-Disposition cannot be read");
    rest = rest.slice(param[0].length);
    const key = (param[1] as string).toLowerCase();
    const raw = param[2] as string;
    const text = raw.startsWith('"') ? raw.slice(1, -1) : raw;
    if (key.startsWith("name*")) throw malformed("a field name uses RFC 2231 encoding");
    if (key === "name") {
      if (name !== undefined) throw malformed("a part names its field twice");
      if (text.includes("\\")) throw malformed("a field name has a backslash");
      name = text;
    } else if (key === "filename") {
      filename = text;
    }
  }
  // `name=""` too: busboy (the task routes' parser) reads it as no name, and refuses the form.
  if (name === undefined || name === "") throw malformed("a part has no field name");
  return { name, filename };
}

function latin1(parts: Buffer[]): string {
  return Buffer.concat(parts).toString("latin1");
}

function percentDecoded(name: string): string {
  if (!name.includes("%")) return name;
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}
