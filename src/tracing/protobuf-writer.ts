/** Protobuf wire types. */
export const WIRE = { VARINT: 0, I64: 1, LEN: 2, I32: 5 } as const;

const TWO_32 = 0x1_0000_0000;

/** Uint8Array's `set`, read once. */
const copyInto = Uint8Array.prototype.set;

/**
 * Protobuf written straight into one growing Buffer: what an OTLP export
 * sends, with no message objects in between. A nested message reserves one
 * byte for its length ({@link begin}) and moves its bytes only when it turned
 * out longer than 127 ({@link end}), which the small messages of a span never
 * are.
 */
export class ProtobufWriter {
  buf: Buffer;
  pos = 0;

  constructor(size = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(size);
  }

  /** Room for `bytes` more bytes. */
  ensure(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + bytes));
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  /** Forgets what was written, keeping the buffer. */
  reset(): void {
    this.pos = 0;
  }

  /** A varint of an unsigned integer up to 2^53. */
  varint(value: number): void {
    this.ensure(10);
    const { buf } = this;
    let pos = this.pos;
    while (value > 0x7f) {
      buf[pos++] = (value % 128) | 0x80;
      value = Math.floor(value / 128);
    }
    buf[pos++] = value;
    this.pos = pos;
  }

  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  /** An int64 varint: negative and past 2^53 in two's complement, as protobuf writes int64. */
  int64(value: number): void {
    if (value >= 0 && value <= Number.MAX_SAFE_INTEGER) return this.varint(value);
    let big = BigInt.asUintN(64, BigInt(value));
    this.ensure(10);
    while (big > 0x7fn) {
      this.buf[this.pos++] = Number(big & 0x7fn) | 0x80;
      big >>= 7n;
    }
    this.buf[this.pos++] = Number(big);
  }

  /** A length-delimited UTF-8 string. */
  string(value: string): void {
    const length = value.length;
    // Up to 42 characters are at most 126 UTF-8 bytes: a one-byte length, no counting;
    // ASCII (attribute names, routes, models) is copied here, short of a native call.
    if (length < 43) {
      this.ensure(1 + length * 3);
      const { buf } = this;
      const start = this.pos + 1;
      for (let i = 0; i < length; i++) {
        const code = value.charCodeAt(i);
        if (code >= 0x80) {
          const written = buf.write(value, start, "utf8");
          buf[start - 1] = written;
          this.pos = start + written;
          return;
        }
        buf[start + i] = code;
      }
      buf[start - 1] = length;
      this.pos = start + length;
      return;
    }
    const bytes = Buffer.byteLength(value, "utf8");
    this.varint(bytes);
    this.ensure(bytes);
    this.pos += this.buf.write(value, this.pos, "utf8");
  }

  /** Bytes encoded before (a cached field), copied as they are. */
  raw(bytes: Uint8Array): void {
    this.ensure(bytes.length);
    // A builtin's copy: fewer instructions than a loop over the bytes (callgrind); called
    // straight, since reading `set` off a Buffer went through V8's generic property load.
    copyInto.call(this.buf, bytes, this.pos);
    this.pos += bytes.length;
  }

  /** Length-delimited bytes given as lower-case hex (an id, which the tracer made or checked). */
  hexBytes(hex: string): void {
    const bytes = hex.length >> 1;
    this.ensure(1 + bytes);
    const { buf } = this;
    let pos = this.pos;
    buf[pos++] = bytes;
    for (let i = 0; i < hex.length; i += 2) {
      buf[pos++] = (nibble(hex.charCodeAt(i)) << 4) | nibble(hex.charCodeAt(i + 1));
    }
    this.pos = pos;
  }

  fixed32(value: number): void {
    this.ensure(4);
    this.pos = this.buf.writeUInt32LE(value >>> 0, this.pos);
  }

  /** A fixed64 of an unsigned integer given as its high and low 32 bits. */
  fixed64(high: number, low: number): void {
    this.ensure(8);
    const { buf } = this;
    const pos = this.pos;
    // Byte by byte: Buffer's writeUInt32LE went through V8's generic property load.
    buf[pos] = low;
    buf[pos + 1] = low >>> 8;
    buf[pos + 2] = low >>> 16;
    buf[pos + 3] = low >>> 24;
    buf[pos + 4] = high;
    buf[pos + 5] = high >>> 8;
    buf[pos + 6] = high >>> 16;
    buf[pos + 7] = high >>> 24;
    this.pos = pos + 8;
  }

  double(value: number): void {
    this.ensure(8);
    this.pos = this.buf.writeDoubleLE(value, this.pos);
  }

  /**
   * Starts a nested message (after its tag), `reserve` bytes kept for its
   * length; returns where its bytes start, for {@link end}.
   */
  begin(reserve = 1): number {
    this.ensure(reserve);
    this.pos += reserve;
    return this.pos;
  }

  /** Ends the nested message {@link begin} started: writes its length before it. */
  end(start: number, reserve = 1): void {
    const length = this.pos - start;
    const size = varintSize(length);
    if (size !== reserve) {
      // Rare: the message's bytes move to fit its length.
      this.ensure(size - reserve);
      this.buf.copy(this.buf, start + size - reserve, start, this.pos);
    }
    const end = start - reserve + size + length;
    this.pos = start - reserve;
    this.varint(length);
    this.pos = end;
  }
}

/** A lower-case hex digit's value. */
function nibble(code: number): number {
  return code < 58 ? code - 48 : code - 87;
}

/** How many bytes the varint of `value` takes. */
export function varintSize(value: number): number {
  let size = 1;
  while (value > 0x7f) {
    value = Math.floor(value / 128);
    size += 1;
  }
  return size;
}

/** Splits a non-negative integer (up to 2^53) into its high and low 32 bits. */
export function split64(value: number): [high: number, low: number] {
  const high = Math.floor(value / TWO_32);
  return [high, value - high * TWO_32];
}
