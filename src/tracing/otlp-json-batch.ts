import type { AttributeList, RecordedSpan } from "./recorded-span.js";
import {
  FLAGS_HAS_IS_REMOTE,
  FLAGS_IS_REMOTE,
  spanFlags,
  type BatchFormat,
  type ExportIdentity,
  type SpanBatch,
} from "./span-batch.js";
import { epochNanosText } from "./span-clock.js";

/**
 * OTLP/HTTP in JSON, as OpenTelemetry's JSON exporter wrote it: hex ids,
 * times as decimal strings, integers as numbers; each span stringified as it
 * ends, the request joined around them.
 */
export function otlpJsonFormat(identity: ExportIdentity): BatchFormat {
  const resource = JSON.stringify({
    attributes: attributesOf(Object.entries(identity.resource).flat()),
    droppedAttributesCount: 0,
  });
  const head = `{"resourceSpans":[{"resource":${resource},"scopeSpans":[{"scope":${JSON.stringify({ name: identity.scope })},"spans":[`;
  return {
    contentType: "application/json",
    newBatch: () => new JsonBatch(head),
  };
}

class JsonBatch implements SpanBatch {
  private spans: string[] = [];

  constructor(private readonly head: string) {}

  get count(): number {
    return this.spans.length;
  }

  add(span: RecordedSpan): void {
    this.spans.push(JSON.stringify(jsonSpan(span)));
  }

  body(): Buffer {
    return Buffer.from(`${this.head}${this.spans.join(",")}]}]}]}`);
  }

  reset(): void {
    this.spans = [];
  }
}

function jsonSpan(span: RecordedSpan) {
  return {
    traceId: span.traceId,
    spanId: span.spanId,
    parentSpanId: span.parentSpanId,
    name: span.name,
    kind: span.kind,
    startTimeUnixNano: epochNanosText(span.start),
    endTimeUnixNano: epochNanosText(span.endTime),
    attributes: attributesOf(span.attributes),
    droppedAttributesCount: span.droppedAttributes,
    events: (span.events ?? []).map((event) => ({
      attributes: attributesOf(event.attributes ?? []),
      name: event.name,
      timeUnixNano: epochNanosText(event.time),
      droppedAttributesCount: 0,
    })),
    droppedEventsCount: span.droppedEvents,
    status:
      span.errorDescription === undefined
        ? { code: 0 }
        : { code: 2, message: span.errorDescription },
    links: span.link
      ? [
          {
            attributes: [],
            spanId: span.link.spanId,
            traceId: span.link.traceId,
            droppedAttributesCount: 0,
            flags: (span.link.sampled ? 1 : 0) | FLAGS_HAS_IS_REMOTE | FLAGS_IS_REMOTE,
          },
        ]
      : [],
    droppedLinksCount: 0,
    flags: spanFlags(span),
  };
}

function attributesOf(list: AttributeList) {
  const attributes = [];
  for (let i = 0; i < list.length; i += 2) {
    attributes.push({ key: list[i] as string, value: anyValue(list[i + 1]!) });
  }
  return attributes;
}

function anyValue(value: string | number | boolean) {
  if (typeof value === "string") return { stringValue: value };
  if (typeof value === "boolean") return { boolValue: value };
  return Number.isInteger(value) ? { intValue: value } : { doubleValue: value };
}
