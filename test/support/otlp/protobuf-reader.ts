/** Protobuf wire types (the low 3 bits of a field's tag). */
export const WIRE = { VARINT: 0, I64: 1, LEN: 2, SGROUP: 3, EGROUP: 4, I32: 5 } as const;

/**
 * Reads the protobuf wire format (https://protobuf.dev/programming-guides/encoding/):
 * just what OTLP's trace messages use. Throws on truncated or malformed
 * input, so a bad body is answered 400 rather than half-decoded.
 */
export class ProtobufReader {
  private pos: number;

  constructor(
    private readonly buf: Uint8Array,
    start = 0,
    private readonly end = buf.length,
  ) {
    this.pos = start;
  }

  /** Whether every byte of this message has been read. */
  done(): boolean {
    return this.pos >= this.end;
  }

  /** The next field's number and wire type. */
  tag(): { field: number; wire: number } {
    const key = this.varint();
    const field = Number(key >> 3n);
    if (field === 0) throw new Error("protobuf: field number 0");
    return { field, wire: Number(key & 7n) };
  }

  varint(): bigint {
    let result = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      const byte = this.byte();
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
    }
    throw new Error("protobuf: varint longer than 10 bytes");
  }

  fixed64(): bigint {
    const view = this.view(8);
    return view.getBigUint64(0, true);
  }

  fixed32(): number {
    return this.view(4).getUint32(0, true);
  }

  double(): number {
    return this.view(8).getFloat64(0, true);
  }

  bytes(): Uint8Array {
    const length = Number(this.varint());
    if (this.pos + length > this.end) throw new Error("protobuf: length past the end");
    const slice = this.buf.subarray(this.pos, this.pos + length);
    this.pos += length;
    return slice;
  }

  string(): string {
    return new TextDecoder("utf-8", { fatal: true }).decode(this.bytes());
  }

  /** A reader over the embedded message that comes next. */
  message(): ProtobufReader {
    const length = Number(this.varint());
    if (this.pos + length > this.end) throw new Error("protobuf: length past the end");
    const sub = new ProtobufReader(this.buf, this.pos, this.pos + length);
    this.pos += length;
    return sub;
  }

  /** Skips a field of an unknown number (newer OTLP versions add fields). */
  skipValue(wire: number): void {
    if (wire === WIRE.VARINT) this.varint();
    else if (wire === WIRE.I64) this.view(8);
    else if (wire === WIRE.LEN) this.bytes();
    else if (wire === WIRE.I32) this.view(4);
    else throw new Error(`protobuf: unsupported wire type ${wire}`);
  }

  private byte(): number {
    if (this.pos >= this.end) throw new Error("protobuf: truncated");
    return this.buf[this.pos++]!;
  }

  private view(size: number): DataView {
    if (this.pos + size > this.end) throw new Error("protobuf: truncated");
    const view = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, size);
    this.pos += size;
    return view;
  }
}

/**
 * Calls `onField(field, wire, reader)` for every field of a message; the
 * callback answers false for a field it does not know, which is skipped.
 */
export function readFields(
  reader: ProtobufReader,
  onField: (field: number, wire: number) => boolean,
): void {
  while (!reader.done()) {
    const { field, wire } = reader.tag();
    if (!onField(field, wire)) reader.skipValue(wire);
  }
}
