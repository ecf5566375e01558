import type { ChannelAnswer } from "./channel-answer.js";

/**
 * How long an answer is still read after its JSON document closed, for its
 * end (the connection is then reused); past it, the answer is dropped and
 * its connection closed. A channel that holds its answer open after the
 * document (a proxy that never sends the last chunk) costs a run this long,
 * not its whole timeout.
 */
export const AFTER_DOCUMENT_MS = 1000;

/**
 * Feeds an answer's chunks to `take` until the answer ends, or until `take`
 * says the JSON document it reads has closed, and returns then: the caller
 * has the whole document and goes on. What comes after it is read in the
 * background and dropped: its end is waited for {@link AFTER_DOCUMENT_MS} at
 * most (so the connection is reused), then the answer is discarded; a failure
 * of the answer after the document (more than it may hold, a cut, an abort)
 * only ends that reading. The channel made (and billed) what the document
 * holds, whatever it sends after it, and a channel or proxy that holds its
 * answer open after the document costs the caller nothing.
 * @param take reads one chunk; true once the document closed (in that chunk or before)
 * @throws whatever the answer or `take` throws before the document closed
 */
export async function readToDocumentEnd(
  chunks: AsyncIterableIterator<Buffer>,
  take: (chunk: Buffer) => boolean,
): Promise<void> {
  let ended: boolean;
  try {
    ended = await readUntil(chunks, take);
  } catch (err) {
    // Given up on (`take` threw, or the answer failed): dropped, its connection closed.
    await chunks.return?.();
    throw err;
  }
  if (!ended) void readRest(chunks);
}

/** Feeds chunks to `take` until it says done (false) or the answer ends (true). */
async function readUntil(
  chunks: AsyncIterableIterator<Buffer>,
  take: (chunk: Buffer) => boolean,
): Promise<boolean> {
  for (;;) {
    const next = await chunks.next();
    if (next.done) return true;
    if (take(next.value)) return false;
  }
}

/**
 * Reads what follows a document to the answer's end, for
 * {@link AFTER_DOCUMENT_MS} at most; then, or when the answer fails, drops
 * it (closing its connection). Never throws: nobody waits for it.
 */
async function readRest(chunks: AsyncIterableIterator<Buffer>): Promise<void> {
  let ended = false;
  try {
    const deadline = Date.now() + AFTER_DOCUMENT_MS;
    while (!ended) {
      const next = await nextWithin(chunks, deadline - Date.now());
      if (next === undefined) break;
      ended = next.done === true;
    }
  } catch {
    // A failure after the document is only the rest's: what it held is read already.
  } finally {
    if (!ended) await Promise.resolve(chunks.return?.()).catch(() => undefined);
  }
}

/** The next chunk, or undefined when `ms` passed first. */
async function nextWithin(
  chunks: AsyncIterableIterator<Buffer>,
  ms: number,
): Promise<IteratorResult<Buffer> | undefined> {
  if (ms <= 0) return undefined;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([chunks.next(), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A JSON answer read up to the end of its top-level object or array (see
 * {@link readToDocumentEnd}), at most `maxBytes`: the bytes of the document,
 * nothing after it. An answer that is no object or array is read to its end.
 */
export async function readJsonDocument(answer: ChannelAnswer, maxBytes: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  const end = new JsonDocumentEnd();
  await readToDocumentEnd(answer.chunks({ maxBytes }), (chunk) => {
    const at = end.push(chunk);
    parts.push(at === -1 ? chunk : chunk.subarray(0, at));
    return at !== -1;
  });
  return parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts);
}

/** Bytes of a string looked at one by one before searching for its end. */
const SHORT_STRING = 48;

/**
 * Finds where a JSON text's top-level object or array closes, chunk by
 * chunk, following strings (and their escapes) so that brackets inside them
 * do not count. It does not check the JSON: a parse of the document does.
 */
export class JsonDocumentEnd {
  private depth = 0;
  private inString = false;
  private escaped = false;
  private ended = false;

  /** The index in `chunk` just after the document's closing bracket, or -1 if not in it. */
  push(chunk: Buffer): number {
    if (this.ended) return 0;
    let index = this.inString ? this.skipString(chunk, 0) : 0;
    // Locals, not fields, in the loop over every byte outside strings (half the scan's cost).
    let depth = this.depth;
    while (index < chunk.length) {
      const byte = chunk[index] as number;
      index += 1;
      if (byte === 0x22) {
        this.inString = true;
        index = this.skipString(chunk, index);
      } else if (byte === 0x7b || byte === 0x5b) depth += 1;
      else if ((byte === 0x7d || byte === 0x5d) && --depth === 0) {
        this.ended = true;
        return index;
      }
    }
    this.depth = depth;
    return -1;
  }

  /**
   * Moves through a string's bytes (a long one, an image's base64, by search,
   * each byte looked at once): where it stopped, after its closing quote or at
   * the chunk's end.
   */
  private skipString(chunk: Buffer, from: number): number {
    let at = from;
    // A short string (a key, an id) byte by byte: the searches' calls cost more than its bytes.
    const short = Math.min(chunk.length, from + SHORT_STRING);
    let escaped = this.escaped;
    while (at < short) {
      const byte = chunk[at] as number;
      at += 1;
      if (escaped) escaped = false;
      else if (byte === 0x5c) escaped = true;
      else if (byte === 0x22) {
        this.escaped = false;
        this.inString = false;
        return at;
      }
    }
    this.escaped = escaped;
    if (at === chunk.length) return at;
    if (this.escaped) {
      this.escaped = false;
      at += 1;
    }
    let quote = chunk.indexOf(0x22, at);
    for (;;) {
      const slash = chunk.subarray(at, quote === -1 ? chunk.length : quote).indexOf(0x5c);
      if (slash === -1) break;
      if (at + slash + 1 >= chunk.length) {
        this.escaped = true;
        return chunk.length;
      }
      at += slash + 2;
      // The quote found was the escaped character: the string goes on.
      if (quote !== -1 && at > quote) quote = chunk.indexOf(0x22, at);
    }
    if (quote === -1) return chunk.length;
    this.inString = false;
    return quote + 1;
  }
}
