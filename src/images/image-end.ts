/**
 * Finds where a PNG, JPEG or WebP file ends, chunk by chunk, from the file's
 * own structure: after its `IEND` chunk (PNG), at its `EOI` marker outside
 * every segment and stuffed scan byte (JPEG), at the length its RIFF header
 * gives (WebP). A download held open after the image's last byte is then not
 * waited on. It does not check the image: anything it cannot follow (another
 * format, a length past reason, a byte where a marker belongs) makes it lost
 * for good, and the download is read to its end as the server sends it.
 */
export class ImageEnd {
  private step: HeaderStep | typeof SCAN | typeof END = {
    need: 3,
    then: (head) => this.sniff(head),
  };
  private header = Buffer.alloc(12);
  private have = 0;
  /** Bytes still to pass over before the next step (a chunk's or segment's body). */
  private skip = 0;
  /** Inside a JPEG scan: the last byte seen was an 0xFF that may start a marker. */
  private scanFF = false;
  private ended = false;
  private lost = false;

  /**
   * The index in `chunk` just after the image's last byte, or -1 while the
   * image goes on past it (or the scanner is lost). Past the end, 0.
   */
  push(chunk: Buffer): number {
    if (this.ended) return 0;
    let at = 0;
    while (!this.lost && at < chunk.length) {
      if (this.skip > 0) {
        const passed = Math.min(this.skip, chunk.length - at);
        this.skip -= passed;
        at += passed;
        continue;
      }
      if (this.step === END) return this.end(at);
      at = this.step === SCAN ? this.scan(chunk, at) : this.fill(chunk, at, this.step);
    }
    if (!this.lost && this.skip === 0 && this.step === END) return this.end(at);
    return -1;
  }

  private end(at: number): number {
    this.ended = true;
    return at;
  }

  /** Collects a header's bytes; with all of them, hands them to the step. */
  private fill(chunk: Buffer, at: number, step: HeaderStep): number {
    const taken = Math.min(step.need - this.have, chunk.length - at);
    chunk.copy(this.header, this.have, at, at + taken);
    this.have += taken;
    if (this.have === step.need) {
      this.have = 0;
      const next = step.then(this.header.subarray(0, step.need));
      if (next === LOST) this.lost = true;
      else this.step = next;
    }
    return at + taken;
  }

  private sniff(head: Buffer): Step {
    if (head[0] === 0x89 && head[1] === 0x50 && head[2] === 0x4e) {
      return { need: 5, then: () => this.pngChunk() };
    }
    if (head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return this.jpegMarkerByte();
    if (head.toString("latin1") === "RIF") {
      return {
        need: 9,
        then: (rest) => {
          const size = rest.readUInt32LE(1);
          if (rest[0] !== 0x46 || size < 4) return LOST;
          // RIFF's size counts from byte 8; 12 are read.
          this.skip = size - 4;
          return END;
        },
      };
    }
    return LOST;
  }

  /** A PNG chunk's length and type; `IEND` is the last, its CRC the file's last bytes. */
  private pngChunk(): Step {
    return {
      need: 8,
      then: (head) => {
        const length = head.readUInt32BE(0);
        if (length > MAX_PNG_CHUNK) return LOST;
        this.skip = length + 4;
        return head.toString("latin1", 4, 8) === "IEND" ? END : this.pngChunk();
      },
    };
  }

  /** The marker byte after a JPEG segment's 0xFF, fill bytes (more 0xFF) skipped. */
  private jpegMarkerByte(): Step {
    return { need: 1, then: (byte) => this.jpegMarker(byte[0] as number) };
  }

  /** Where a JPEG marker leads: the end, a scan, or past a segment of its length. */
  private jpegMarker(marker: number): Step {
    if (marker === 0xff) return this.jpegMarkerByte();
    if (marker === 0xd9) return END;
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) return this.jpegNextMarker();
    if (marker === 0x00 || marker === 0xd8) return LOST;
    return {
      need: 2,
      then: (length) => {
        const size = length.readUInt16BE(0);
        if (size < 2) return LOST;
        this.skip = size - 2;
        // A scan's entropy-coded data follows its header, up to the next marker.
        return marker === 0xda ? SCAN : this.jpegNextMarker();
      },
    };
  }

  /** The 0xFF that must start the next JPEG marker. */
  private jpegNextMarker(): Step {
    return { need: 1, then: (byte) => (byte[0] === 0xff ? this.jpegMarkerByte() : LOST) };
  }

  /**
   * Passes over a scan's entropy-coded data: an 0xFF there is followed by 0x00
   * (a stuffed byte), a restart marker or more 0xFF; anything else is the
   * marker that ends the scan.
   */
  private scan(chunk: Buffer, from: number): number {
    let at = from;
    while (at < chunk.length) {
      if (!this.scanFF) {
        const ff = chunk.indexOf(0xff, at);
        if (ff === -1) return chunk.length;
        this.scanFF = true;
        at = ff + 1;
        continue;
      }
      const byte = chunk[at] as number;
      at += 1;
      if (byte === 0xff) continue;
      this.scanFF = false;
      if (byte === 0x00 || (byte >= 0xd0 && byte <= 0xd7)) continue;
      const next = this.jpegMarker(byte);
      if (next === LOST) this.lost = true;
      else this.step = next;
      return at;
    }
    return at;
  }
}

/** A header of `need` bytes, then what it leads to. */
interface HeaderStep {
  need: number;
  then: (header: Buffer) => Step;
}

type Step = HeaderStep | typeof SCAN | typeof END | typeof LOST;

const SCAN = Symbol("scan");
const END = Symbol("end");
const LOST = Symbol("lost");

/** PNG's own bound on a chunk's length (2^31 - 1). */
const MAX_PNG_CHUNK = 0x7fffffff;
