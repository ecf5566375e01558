import type {
  OtlpAnyValue,
  OtlpEvent,
  OtlpKeyValue,
  OtlpLink,
  OtlpResourceSpans,
  OtlpScopeSpans,
  OtlpSpan,
  OtlpTraceRequest,
} from "./otlp-json.js";
import { ProtobufReader, WIRE, readFields } from "./protobuf-reader.js";

type Handlers = Record<number, [wire: number, read: (reader: ProtobufReader) => void]>;

/** Reads a message's fields with `handlers`; a field of another number or wire type is skipped. */
function decode(reader: ProtobufReader, handlers: Handlers): void {
  readFields(reader, (field, wire) => {
    const handler = handlers[field];
    if (!handler || handler[0] !== wire) return false;
    handler[1](reader);
    return true;
  });
}

/*
 * Field numbers of opentelemetry-proto (collector/trace/v1/trace_service.proto,
 * trace/v1/trace.proto, common/v1/common.proto, resource/v1/resource.proto).
 */

/** Decodes a protobuf ExportTraceServiceRequest into its OTLP/JSON shape. */
export function decodeTraceRequest(body: Uint8Array): OtlpTraceRequest {
  const resourceSpans: OtlpResourceSpans[] = [];
  decode(new ProtobufReader(body), {
    1: [WIRE.LEN, (r) => resourceSpans.push(readResourceSpans(r.message()))],
  });
  return { resourceSpans };
}

function readResourceSpans(reader: ProtobufReader): OtlpResourceSpans {
  const out: Required<OtlpResourceSpans> = { resource: { attributes: [] }, scopeSpans: [] };
  decode(reader, {
    1: [WIRE.LEN, (r) => (out.resource = { attributes: readAttributesOf(r.message(), 1) })],
    2: [WIRE.LEN, (r) => out.scopeSpans.push(readScopeSpans(r.message()))],
  });
  return out;
}

function readScopeSpans(reader: ProtobufReader): OtlpScopeSpans {
  const out: Required<OtlpScopeSpans> = { scope: {}, spans: [] };
  decode(reader, {
    1: [WIRE.LEN, (r) => (out.scope = readScope(r.message()))],
    2: [WIRE.LEN, (r) => out.spans.push(readSpan(r.message()))],
  });
  return out;
}

function readScope(reader: ProtobufReader): NonNullable<OtlpScopeSpans["scope"]> {
  const scope: NonNullable<OtlpScopeSpans["scope"]> = { attributes: [] };
  decode(reader, {
    1: [WIRE.LEN, (r) => (scope.name = r.string())],
    2: [WIRE.LEN, (r) => (scope.version = r.string())],
    3: [WIRE.LEN, (r) => scope.attributes!.push(readKeyValue(r.message()))],
  });
  return scope;
}

function readSpan(reader: ProtobufReader): OtlpSpan {
  const span: OtlpSpan = { attributes: [], events: [], links: [] };
  decode(reader, {
    1: [WIRE.LEN, (r) => (span.traceId = hex(r.bytes()))],
    2: [WIRE.LEN, (r) => (span.spanId = hex(r.bytes()))],
    3: [WIRE.LEN, (r) => (span.traceState = r.string())],
    4: [WIRE.LEN, (r) => (span.parentSpanId = hex(r.bytes()))],
    5: [WIRE.LEN, (r) => (span.name = r.string())],
    6: [WIRE.VARINT, (r) => (span.kind = Number(r.varint()))],
    7: [WIRE.I64, (r) => (span.startTimeUnixNano = r.fixed64().toString())],
    8: [WIRE.I64, (r) => (span.endTimeUnixNano = r.fixed64().toString())],
    9: [WIRE.LEN, (r) => span.attributes!.push(readKeyValue(r.message()))],
    11: [WIRE.LEN, (r) => span.events!.push(readEvent(r.message()))],
    13: [WIRE.LEN, (r) => span.links!.push(readLink(r.message()))],
    15: [WIRE.LEN, (r) => (span.status = readStatus(r.message()))],
    16: [WIRE.I32, (r) => (span.flags = r.fixed32())],
  });
  return span;
}

function readEvent(reader: ProtobufReader): OtlpEvent {
  const event: OtlpEvent = { attributes: [] };
  decode(reader, {
    1: [WIRE.I64, (r) => (event.timeUnixNano = r.fixed64().toString())],
    2: [WIRE.LEN, (r) => (event.name = r.string())],
    3: [WIRE.LEN, (r) => event.attributes!.push(readKeyValue(r.message()))],
  });
  return event;
}

function readLink(reader: ProtobufReader): OtlpLink {
  const link: OtlpLink = { attributes: [] };
  decode(reader, {
    1: [WIRE.LEN, (r) => (link.traceId = hex(r.bytes()))],
    2: [WIRE.LEN, (r) => (link.spanId = hex(r.bytes()))],
    3: [WIRE.LEN, (r) => (link.traceState = r.string())],
    4: [WIRE.LEN, (r) => link.attributes!.push(readKeyValue(r.message()))],
  });
  return link;
}

function readStatus(reader: ProtobufReader): OtlpSpan["status"] {
  const status: NonNullable<OtlpSpan["status"]> = { code: 0 };
  decode(reader, {
    2: [WIRE.LEN, (r) => (status.message = r.string())],
    3: [WIRE.VARINT, (r) => (status.code = Number(r.varint()))],
  });
  return status;
}

/** The repeated KeyValue field `field` of a message (Resource: 1). */
function readAttributesOf(reader: ProtobufReader, field: number): OtlpKeyValue[] {
  const attributes: OtlpKeyValue[] = [];
  decode(reader, { [field]: [WIRE.LEN, (r) => attributes.push(readKeyValue(r.message()))] });
  return attributes;
}

function readKeyValue(reader: ProtobufReader): OtlpKeyValue {
  const kv: OtlpKeyValue = { key: "" };
  decode(reader, {
    1: [WIRE.LEN, (r) => (kv.key = r.string())],
    2: [WIRE.LEN, (r) => (kv.value = readAnyValue(r.message()))],
  });
  return kv;
}

function readAnyValue(reader: ProtobufReader): OtlpAnyValue {
  let value: OtlpAnyValue = {};
  decode(reader, {
    1: [WIRE.LEN, (r) => (value = { stringValue: r.string() })],
    2: [WIRE.VARINT, (r) => (value = { boolValue: r.varint() !== 0n })],
    3: [WIRE.VARINT, (r) => (value = { intValue: BigInt.asIntN(64, r.varint()) })],
    4: [WIRE.I64, (r) => (value = { doubleValue: r.double() })],
    5: [WIRE.LEN, (r) => (value = { arrayValue: { values: readValues(r.message()) } })],
    6: [WIRE.LEN, (r) => (value = { kvlistValue: { values: readAttributesOf(r.message(), 1) } })],
    7: [WIRE.LEN, (r) => (value = { bytesValue: r.bytes().slice() })],
  });
  return value;
}

function readValues(reader: ProtobufReader): OtlpAnyValue[] {
  const values: OtlpAnyValue[] = [];
  decode(reader, { 1: [WIRE.LEN, (r) => values.push(readAnyValue(r.message()))] });
  return values;
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("hex");
}
