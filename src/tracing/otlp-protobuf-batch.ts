import { writeAttributes, writeKeyValue } from "./otlp-protobuf-attributes.js";
import { ProtobufWriter, WIRE, varintSize } from "./protobuf-writer.js";
import type { RecordedSpan } from "./recorded-span.js";
import {
  FLAGS_HAS_IS_REMOTE,
  FLAGS_IS_REMOTE,
  spanFlags,
  type BatchFormat,
  type ExportIdentity,
  type SpanBatch,
} from "./span-batch.js";
import { writeEpochNanos } from "./span-clock.js";

/*
 * Field numbers of opentelemetry-proto: trace_service.proto (the request),
 * trace.proto (ResourceSpans, ScopeSpans, Span, Event, Link, Status),
 * common.proto (KeyValue, AnyValue, InstrumentationScope), resource.proto.
 */

/** OTLP/HTTP in protobuf: each span encoded into the batch's one Buffer as it ends. */
export function otlpProtobufFormat(identity: ExportIdentity): BatchFormat {
  const header = encodeHeader(identity);
  return {
    contentType: "application/x-protobuf",
    newBatch: () => new ProtobufBatch(header),
  };
}

/** The resource (ResourceSpans field 1) and the scope (ScopeSpans field 1), tags included. */
function encodeHeader(identity: ExportIdentity): { resource: Buffer; scope: Buffer } {
  const writer = new ProtobufWriter(1024);
  writer.tag(1, WIRE.LEN);
  const resource = writer.begin();
  for (const key of Object.keys(identity.resource)) {
    writeKeyValue(writer, 1, key, identity.resource[key]!);
  }
  writer.end(resource);
  const resourceBytes = Buffer.from(writer.buf.subarray(0, writer.pos));
  writer.reset();
  writer.tag(1, WIRE.LEN);
  const scope = writer.begin();
  writer.tag(1, WIRE.LEN);
  writer.string(identity.scope);
  writer.end(scope);
  return { resource: resourceBytes, scope: Buffer.from(writer.buf.subarray(0, writer.pos)) };
}

/** Room before the spans for the request's header: the tags and lengths around them. */
const LENGTHS_ROOM = 2 * (1 + 5);

class ProtobufBatch implements SpanBatch {
  count = 0;
  private readonly writer = new ProtobufWriter(64 * 1024);
  private readonly spansStart: number;

  constructor(private readonly header: { resource: Buffer; scope: Buffer }) {
    this.spansStart = header.resource.length + header.scope.length + LENGTHS_ROOM;
    this.writer.pos = this.spansStart;
  }

  add(span: RecordedSpan): void {
    const { writer } = this;
    writer.tag(2, WIRE.LEN); // ScopeSpans.spans
    const start = writer.begin(2);
    writeSpan(writer, span);
    writer.end(start, 2);
    this.count += 1;
  }

  /** Writes the header right before the spans: the body is one slice, nothing copied. */
  body(): Buffer {
    const { writer, header } = this;
    const end = writer.pos;
    const scopeSpans = header.scope.length + (end - this.spansStart);
    const resourceSpans = header.resource.length + 1 + varintSize(scopeSpans) + scopeSpans;
    const headerSize =
      1 + varintSize(resourceSpans) + header.resource.length + 1 + varintSize(scopeSpans);
    const first = this.spansStart - headerSize - header.scope.length;
    writer.pos = first;
    writer.tag(1, WIRE.LEN); // ExportTraceServiceRequest.resource_spans
    writer.varint(resourceSpans);
    writer.pos += header.resource.copy(writer.buf, writer.pos);
    writer.tag(2, WIRE.LEN); // ResourceSpans.scope_spans
    writer.varint(scopeSpans);
    header.scope.copy(writer.buf, writer.pos);
    return writer.buf.subarray(first, end);
  }

  reset(): void {
    this.count = 0;
    this.writer.pos = this.spansStart;
  }
}

function writeSpan(writer: ProtobufWriter, span: RecordedSpan): void {
  writer.tag(1, WIRE.LEN);
  writer.hexBytes(span.traceId);
  writer.tag(2, WIRE.LEN);
  writer.hexBytes(span.spanId);
  if (span.parentSpanId) {
    writer.tag(4, WIRE.LEN);
    writer.hexBytes(span.parentSpanId);
  }
  writer.tag(5, WIRE.LEN);
  writer.string(span.name);
  writer.tag(6, WIRE.VARINT);
  writer.varint(span.kind);
  writer.tag(7, WIRE.I64);
  writeEpochNanos(writer, span.start);
  writer.tag(8, WIRE.I64);
  writeEpochNanos(writer, span.endTime);
  writeAttributes(writer, 9, span.attributes);
  if (span.droppedAttributes > 0) {
    writer.tag(10, WIRE.VARINT);
    writer.varint(span.droppedAttributes);
  }
  if (span.events) {
    for (const event of span.events) {
      writer.tag(11, WIRE.LEN);
      const start = writer.begin();
      writer.tag(1, WIRE.I64);
      writeEpochNanos(writer, event.time);
      writer.tag(2, WIRE.LEN);
      writer.string(event.name);
      if (event.attributes) writeAttributes(writer, 3, event.attributes);
      writer.end(start);
    }
  }
  if (span.droppedEvents > 0) {
    writer.tag(12, WIRE.VARINT);
    writer.varint(span.droppedEvents);
  }
  if (span.link) writeLink(writer, span.link);
  writer.tag(15, WIRE.LEN);
  const status = writer.begin();
  if (span.errorDescription !== undefined) {
    if (span.errorDescription) {
      writer.tag(2, WIRE.LEN);
      writer.string(span.errorDescription);
    }
    writer.tag(3, WIRE.VARINT);
    writer.varint(2); // STATUS_CODE_ERROR
  }
  writer.end(status);
  writer.tag(16, WIRE.I32);
  writer.fixed32(spanFlags(span));
}

function writeLink(writer: ProtobufWriter, link: NonNullable<RecordedSpan["link"]>): void {
  writer.tag(13, WIRE.LEN);
  const start = writer.begin();
  writer.tag(1, WIRE.LEN);
  writer.hexBytes(link.traceId);
  writer.tag(2, WIRE.LEN);
  writer.hexBytes(link.spanId);
  writer.tag(6, WIRE.I32);
  writer.fixed32((link.sampled ? 1 : 0) | FLAGS_HAS_IS_REMOTE | FLAGS_IS_REMOTE);
  writer.end(start);
}
