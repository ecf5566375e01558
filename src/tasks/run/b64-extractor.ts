import { releaseImageBuffers, takeImageBuffer } from "./image-buffers.js";

/**
 * Takes the `b64_json` images out of a JSON answer as it streams, decoding
 * each as its bytes arrive, and keeps the rest of the answer (a few hundred
 * bytes: `created`, `usage`, revised prompts) as JSON text where each
 * `b64_json` string holds a marker instead (`"#b64:<n>"`, `n` counting from
 * 0 in the order they came). A 3 MB image (4 MB of base64) is thus never
 * held as one string or a parsed JSON value: chunks are decoded on the way,
 * straight into one buffer per image (sized from the answer's length when it
 * is known, and then one of `image-buffers.ts`, which the run gives back once
 * the image is stored; else grown by doubling), and what is kept is the
 * decoded bytes.
 *
 * The JSON itself is not checked here: the skeleton is parsed afterwards,
 * and anything broken fails there. What it does follow is the nesting of
 * objects and arrays, so that the end of an answer's top-level object is
 * known ({@link B64Extractor.complete}) even when the channel does not end
 * its answer there; anything after it is not kept.
 */
/** Keys are compared only when this short: `b64_json` is 8 bytes. */
const MAX_KEY_BYTES = 16;
/** Images smaller than this get a buffer of their own: a small one costs little to allocate. */
const POOLED_BYTES = 64 * 1024;
/** An image's first buffer when the answer's length is unknown. */
const FIRST_BYTES = 64 * 1024;
/**
 * Room left unused in a finished image's buffer, at most, before it is copied
 * to its size: this much, or a quarter of the image (a buffer of
 * `image-buffers.ts` is a little larger than asked, and goes back after the
 * store anyway; one sized for several images is not).
 */
const SLACK_BYTES = 4096;

export class B64Extractor {
  /** The answer's JSON without its images. */
  private skeleton: Buffer[] = [];
  /** Decoded images, each in one buffer, filled up to its size. */
  private readonly images: Buffer[] = [];
  private readonly sizes: number[] = [];
  /** Bytes of the answer pushed so far. */
  private pushed = 0;
  /** Outside an image: where the scanner stands. */
  private state: "value" | "string" | "escape" = "value";
  /** The last string closed outside an image, while it may turn out to be a key. */
  private lastString: number[] | undefined;
  private current: number[] | undefined;
  /** Whether a `:` followed the last string (it was a key). */
  private keyIs: string | undefined;
  /** In an image: base64 characters not decoded yet (fewer than 4), and an escape cut by a chunk. */
  private inImage = false;
  private carry = "";
  private pendingEscape = "";
  /** Objects and arrays open outside strings. */
  private depth = 0;
  private ended = false;

  /**
   * @param imageKey the key whose string values are images: `b64_json` in an
   *   image answer, `result` in a Responses `image_generation_call` item
   * @param answerBytes the answer's length, when known (an uncompressed
   *   `Content-Length`): an image's base64 is no longer than what is left of
   *   it, so its buffer is allocated once
   */
  constructor(
    private readonly maxImageBytes: number,
    private readonly imageKey = "b64_json",
    private readonly answerBytes?: number,
  ) {}

  /** The images so far, decoded, in the order they came. */
  get decoded(): Buffer[] {
    return this.images.map((buffer, n) => buffer.subarray(0, this.sizes[n]));
  }

  /**
   * Whether the answer's top-level object or array has closed: the rest of
   * the answer is not needed (and {@link push} ignores it).
   */
  get complete(): boolean {
    return this.ended;
  }

  /** The answer without its images (valid JSON when the answer was). */
  get rest(): Buffer {
    return Buffer.concat(this.skeleton);
  }

  /**
   * Feeds the next chunk of the answer.
   * @throws RangeError when an image decodes to more than `maxImageBytes`
   * @throws SyntaxError when an image holds an escape base64 cannot
   */
  push(chunk: Buffer): void {
    if (this.ended) return;
    const base = this.pushed;
    this.pushed += chunk.length;
    let start = 0;
    let index = 0;
    while (index < chunk.length) {
      if (this.inImage) {
        const end = this.scanImage(chunk, index);
        if (end === -1) return;
        index = end;
        start = index;
        continue;
      }
      const byte = chunk[index] as number;
      index += 1;
      if (this.state === "string") {
        if (byte === 0x22) this.closeString();
        else if (byte === 0x5c) this.state = "escape";
        else this.keep(byte);
        continue;
      }
      if (this.state === "escape") {
        this.state = "string";
        this.keep(0x5c);
        this.keep(byte);
        continue;
      }
      if (byte === 0x22) {
        if (this.keyIs === this.imageKey) {
          // The opening quote of an image: the skeleton gets a marker in its place.
          this.skeleton.push(chunk.subarray(start, index - 1));
          this.skeleton.push(Buffer.from(`"#b64:${this.images.length}"`));
          this.images.push(this.firstBuffer(base + index));
          this.sizes.push(0);
          this.inImage = true;
          this.keyIs = undefined;
          this.lastString = undefined;
          start = index;
          continue;
        }
        this.state = "string";
        this.current = [];
        continue;
      }
      if (byte === 0x7b || byte === 0x5b) {
        this.depth += 1;
      } else if ((byte === 0x7d || byte === 0x5d) && --this.depth === 0) {
        this.skeleton.push(chunk.subarray(start, index));
        this.ended = true;
        return;
      }
      if (byte === 0x3a) {
        this.keyIs = this.lastString ? Buffer.from(this.lastString).toString("utf8") : undefined;
      } else if (byte > 0x20) {
        this.keyIs = undefined;
      }
      if (byte !== 0x3a && byte > 0x20) this.lastString = undefined;
    }
    if (!this.inImage) this.skeleton.push(chunk.subarray(start));
  }

  /** The first buffer of an image whose base64 starts at `offset` of the answer. */
  private firstBuffer(offset: number): Buffer {
    const left = this.answerBytes === undefined ? undefined : this.answerBytes - offset;
    if (left === undefined || left <= 0) {
      return Buffer.allocUnsafe(Math.min(FIRST_BYTES, this.maxImageBytes + 3));
    }
    return imageBuffer(Math.min(Math.floor((left * 3) / 4) + 3, this.maxImageBytes + 3));
  }

  /** A byte of a string outside an image: only the first ones matter (a key is short). */
  private keep(byte: number): void {
    if (this.current && this.current.length <= MAX_KEY_BYTES) this.current.push(byte);
  }

  /** Ends a string outside an image: it may be a key (short ones only are kept to compare). */
  private closeString(): void {
    this.state = "value";
    this.lastString =
      this.current && this.current.length <= MAX_KEY_BYTES ? this.current : undefined;
    this.current = undefined;
  }

  /**
   * Decodes the image's characters from `from` on; returns where the image
   * ended (after its closing quote), or -1 when it goes on in the next chunk.
   */
  private scanImage(chunk: Buffer, from: number): number {
    let index = from;
    while (index < chunk.length) {
      if (this.pendingEscape !== "" || chunk[index] === 0x5c) {
        index = this.readEscape(chunk, index);
        continue;
      }
      const quote = chunk.indexOf(0x22, index);
      const slash = chunk.indexOf(0x5c, index);
      const stop = Math.min(
        quote === -1 ? chunk.length : quote,
        slash === -1 ? chunk.length : slash,
      );
      this.decodeBytes(chunk, index, stop);
      index = stop;
      if (stop === quote) {
        this.finishImage();
        return stop + 1;
      }
    }
    return -1;
  }

  /** One escape inside an image (`\/`, or a line break some encoders put in base64). */
  private readEscape(chunk: Buffer, index: number): number {
    let at = index;
    if (this.pendingEscape === "") {
      this.pendingEscape = "\\";
      at += 1;
    }
    while (at < chunk.length) {
      this.pendingEscape += String.fromCharCode(chunk[at] as number);
      at += 1;
      const escape = this.pendingEscape;
      if (escape.length === 2 && escape[1] !== "u") {
        this.pendingEscape = "";
        if (escape[1] === "/") this.decode("/");
        // \n \r \t: whitespace, which base64 skips; anything else cannot be base64.
        else if (!"nrt".includes(escape[1] as string)) {
          throw new SyntaxError("an image holds an escape that is not base64");
        }
        return at;
      }
      if (escape.length === 6) {
        this.pendingEscape = "";
        this.decode(String.fromCharCode(Number.parseInt(escape.slice(2), 16)));
        return at;
      }
    }
    return at;
  }

  /** Decodes whole groups of four characters, carrying the rest to the next piece. */
  private decode(text: string): void {
    const all = this.carry + text;
    const whole = all.length - (all.length % 4);
    this.carry = all.slice(whole);
    if (whole > 0) this.append(all.slice(0, whole));
  }

  /**
   * {@link decode} of base64 characters read from `chunk` (`from` to `stop`):
   * the carried group completed first, then the whole groups in one piece,
   * with no string built beyond the one the decoder reads.
   */
  private decodeBytes(chunk: Buffer, from: number, stop: number): void {
    let at = from;
    if (this.carry !== "") {
      const take = Math.min(4 - this.carry.length, stop - at);
      this.carry += chunk.toString("latin1", at, at + take);
      at += take;
      if (this.carry.length < 4) return;
      this.append(this.carry);
      this.carry = "";
    }
    const whole = stop - ((stop - at) % 4);
    if (whole > at) this.append(chunk.toString("latin1", at, whole));
    if (whole < stop) this.carry = chunk.toString("latin1", whole, stop);
  }

  private finishImage(): void {
    if (this.carry !== "") this.append(this.carry);
    this.carry = "";
    this.inImage = false;
    // A buffer sized from the answer's length holds every image after this one too: cut it.
    const n = this.images.length - 1;
    const size = this.sizes[n]!;
    const buffer = this.images[n]!;
    if (buffer.length - size > Math.max(SLACK_BYTES, size / 4)) {
      const cut = imageBuffer(size);
      buffer.copy(cut, 0, 0, size);
      this.images[n] = cut;
      releaseImageBuffers([buffer]);
    }
  }

  /** Decodes `base64` at the end of the current image, its buffer grown first when short. */
  private append(base64: string): void {
    const n = this.images.length - 1;
    const size = this.sizes[n]!;
    const most = Math.floor((base64.length * 3) / 4) + 3;
    let buffer = this.images[n]!;
    if (size + most > buffer.length) {
      // An answer of unknown length (compressed, or chunked) grows its image by doubling.
      const grown = imageBuffer(
        Math.max(size + most, Math.min(buffer.length * 2, this.maxImageBytes + 3)),
      );
      buffer.copy(grown, 0, 0, size);
      releaseImageBuffers([buffer]);
      this.images[n] = buffer = grown;
    }
    const total = size + buffer.write(base64, size, "base64");
    if (total > this.maxImageBytes) throw new RangeError("an image is larger than allowed");
    this.sizes[n] = total;
  }
}

/**
 * A buffer for `bytes` of image: a small one of its own (cheap to allocate),
 * a larger one from `image-buffers.ts` (reused, and page-aligned for a direct
 * write).
 */
function imageBuffer(bytes: number): Buffer {
  return bytes < POOLED_BYTES ? Buffer.allocUnsafe(bytes) : takeImageBuffer(bytes);
}

/** The marker the skeleton holds in place of image `n`; undefined for any other value. */
export function extractedIndex(value: unknown): number | undefined {
  if (typeof value !== "string" || !value.startsWith("#b64:")) return undefined;
  const n = Number(value.slice(5));
  return Number.isInteger(n) && n >= 0 ? n : undefined;
}
