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
  /** The text does not start with `{` or `[` (an HTML page, a number): it has no end here. */
  private noDocument = false;

  /** The index in `chunk` just after the document's closing bracket, or -1 if not in it. */
  push(chunk: Buffer): number {
    if (this.ended) return 0;
    if (this.noDocument) return -1;
    let index = this.inString ? this.skipString(chunk, 0) : 0;
    // Locals, not fields, in the loop over every byte outside strings (half the scan's cost).
    let depth = this.depth;
    while (index < chunk.length) {
      const byte = chunk[index] as number;
      index += 1;
      if (depth === 0 && byte !== 0x7b && byte !== 0x5b) {
        // Before the document opens: only whitespace may come first.
        if (byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09) continue;
        this.noDocument = true;
        return -1;
      }
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
