import { ProtobufWriter, WIRE } from "./protobuf-writer.js";
import type { AttributeList, AttributeValue } from "./recorded-span.js";

/*
 * Attributes repeat from span to span: the same keys (the service's own few names) and, for
 * most of them, the same string values (the method, the route, the model, the channel). Each
 * key's field is encoded once, and each string value's whole KeyValue the first times it is
 * seen, then copied as bytes: the same bytes, fewer instructions per span.
 */

/** A key's encodings: its KeyValue.key field, and whole KeyValues (length first) by value. */
interface KeyEncodings {
  key: Buffer;
  values: Map<string, Buffer>;
}

const encodings = new Map<string, KeyEncodings>();
/** Bounds of what is kept: a few keys, each with a few values; values past them are written. */
const MAX_KEYS = 256;
const MAX_VALUES_PER_KEY = 64;
const MAX_KEPT_VALUE_LENGTH = 64;

const scratch = new ProtobufWriter(256);

function encodingsOf(key: string): KeyEncodings | undefined {
  let known = encodings.get(key);
  if (known !== undefined || encodings.size >= MAX_KEYS) return known;
  scratch.reset();
  scratch.tag(1, WIRE.LEN);
  scratch.string(key);
  known = { key: Buffer.from(scratch.buf.subarray(0, scratch.pos)), values: new Map() };
  encodings.set(key, known);
  return known;
}

/** A list's attributes, each a KeyValue in `field`. */
export function writeAttributes(writer: ProtobufWriter, field: number, list: AttributeList): void {
  for (let i = 0; i < list.length; i += 2) {
    writeKeyValue(writer, field, list[i] as string, list[i + 1]!);
  }
}

/** One attribute as a KeyValue in `field` (a span's, an event's, the resource's). */
export function writeKeyValue(
  writer: ProtobufWriter,
  field: number,
  key: string,
  value: AttributeValue,
): void {
  const known = encodingsOf(key);
  writer.tag(field, WIRE.LEN);
  const text = typeof value === "string";
  if (text && known !== undefined) {
    const whole = known.values.get(value);
    if (whole !== undefined) return writer.raw(whole);
  }
  const from = writer.pos;
  const start = writer.begin();
  if (known !== undefined) {
    writer.raw(known.key);
  } else {
    writer.tag(1, WIRE.LEN);
    writer.string(key);
  }
  writer.tag(2, WIRE.LEN);
  const any = writer.begin();
  writeAnyValue(writer, value);
  writer.end(any);
  writer.end(start);
  if (
    text &&
    known !== undefined &&
    value.length <= MAX_KEPT_VALUE_LENGTH &&
    known.values.size < MAX_VALUES_PER_KEY
  ) {
    known.values.set(value, Buffer.from(writer.buf.subarray(from, writer.pos)));
  }
}

function writeAnyValue(writer: ProtobufWriter, value: AttributeValue): void {
  if (typeof value === "string") {
    writer.tag(1, WIRE.LEN);
    writer.string(value);
  } else if (typeof value === "boolean") {
    writer.tag(2, WIRE.VARINT);
    writer.varint(value ? 1 : 0);
  } else if (Number.isInteger(value) && value >= -(2 ** 63) && value < 2 ** 63) {
    writer.tag(3, WIRE.VARINT);
    writer.int64(value);
  } else {
    writer.tag(4, WIRE.I64);
    writer.double(value);
  }
}
