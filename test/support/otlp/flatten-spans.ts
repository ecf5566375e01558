import type { OtlpAnyValue, OtlpKeyValue, OtlpSpan, OtlpTraceRequest } from "./otlp-json.js";

/** An attribute value as the sender set it (64-bit integers past 2^53 stay bigint). */
export type AttributeValue =
  | string
  | number
  | boolean
  | bigint
  | Uint8Array
  | null
  | AttributeValue[]
  | { [key: string]: AttributeValue };

export type Attributes = Record<string, AttributeValue>;

/** OTLP's SpanKind numbers (not @opentelemetry/api's, which start at INTERNAL = 0). */
export const OTLP_SPAN_KIND = {
  UNSPECIFIED: 0,
  INTERNAL: 1,
  SERVER: 2,
  CLIENT: 3,
  PRODUCER: 4,
  CONSUMER: 5,
} as const;

/** OTLP's status codes (the same numbers as @opentelemetry/api's SpanStatusCode). */
export const OTLP_STATUS_CODE = { UNSET: 0, OK: 1, ERROR: 2 } as const;

/** One span as a receiver got it, with its resource and scope. */
export interface ReceivedSpan {
  /** 32 lower-case hex digits. */
  traceId: string;
  /** 16 lower-case hex digits. */
  spanId: string;
  /** Undefined for a root span. */
  parentSpanId: string | undefined;
  traceState: string | undefined;
  name: string;
  /** {@link OTLP_SPAN_KIND}: SERVER is 2, CLIENT 3. */
  kind: number;
  /** Nanoseconds since the epoch, in decimal (exact past 2^53). */
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Attributes;
  events: Array<{ name: string; timeUnixNano: string; attributes: Attributes }>;
  links: Array<{ traceId: string; spanId: string; attributes: Attributes }>;
  /** {@link OTLP_STATUS_CODE}: UNSET 0, OK 1, ERROR 2. */
  status: { code: number; message: string | undefined };
  /** The resource's attributes (`service.name`, ...). */
  resource: Attributes;
  scope: { name: string; version: string | undefined };
}

/** Every span of an ExportTraceServiceRequest (protobuf-decoded or parsed JSON), flattened. */
export function flattenSpans(request: OtlpTraceRequest): ReceivedSpan[] {
  if (typeof request !== "object" || request === null || Array.isArray(request)) {
    throw new Error("the body is not an ExportTraceServiceRequest object");
  }
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of list(request.resourceSpans, "resourceSpans")) {
    const resource = attributesOf(resourceSpans.resource?.attributes);
    for (const scopeSpans of list(resourceSpans.scopeSpans, "scopeSpans")) {
      const scope = {
        name: scopeSpans.scope?.name ?? "",
        version: scopeSpans.scope?.version || undefined,
      };
      for (const span of list(scopeSpans.spans, "spans")) {
        spans.push(flattenSpan(span, resource, scope));
      }
    }
  }
  return spans;
}

function flattenSpan(
  span: OtlpSpan,
  resource: Attributes,
  scope: ReceivedSpan["scope"],
): ReceivedSpan {
  return {
    traceId: id(span.traceId, "traceId"),
    spanId: id(span.spanId, "spanId"),
    parentSpanId: span.parentSpanId ? id(span.parentSpanId, "parentSpanId") : undefined,
    traceState: span.traceState || undefined,
    name: span.name ?? "",
    kind: enumNumber(span.kind, "SPAN_KIND_", OTLP_SPAN_KIND),
    startTimeUnixNano: String(span.startTimeUnixNano ?? "0"),
    endTimeUnixNano: String(span.endTimeUnixNano ?? "0"),
    attributes: attributesOf(span.attributes),
    events: list(span.events, "events").map((event) => ({
      name: event.name ?? "",
      timeUnixNano: String(event.timeUnixNano ?? "0"),
      attributes: attributesOf(event.attributes),
    })),
    links: list(span.links, "links").map((link) => ({
      traceId: id(link.traceId, "links.traceId"),
      spanId: id(link.spanId, "links.spanId"),
      attributes: attributesOf(link.attributes),
    })),
    status: {
      code: enumNumber(span.status?.code, "STATUS_CODE_", OTLP_STATUS_CODE),
      message: span.status?.message || undefined,
    },
    resource,
    scope,
  };
}

function list<T>(value: T[] | undefined, name: string): T[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new Error(`${name}: not an array`);
  return value;
}

function id(value: string | undefined, name: string): string {
  if (typeof value !== "string" || !/^[0-9a-fA-F]*$/.test(value)) {
    throw new Error(`${name}: not a hex string (${JSON.stringify(value)})`);
  }
  return value.toLowerCase();
}

/** An enum as OTLP/JSON senders write it: a number, or (proto3 JSON) the value's name. */
function enumNumber(
  value: number | string | undefined,
  prefix: string,
  names: Record<string, number>,
): number {
  if (value === undefined) return 0;
  if (typeof value === "number") return value;
  const named = names[value.replace(prefix, "")];
  if (named === undefined) throw new Error(`unknown enum value ${JSON.stringify(value)}`);
  return named;
}

export function attributesOf(keyValues: OtlpKeyValue[] | undefined): Attributes {
  const attributes: Attributes = {};
  for (const kv of list(keyValues, "attributes")) attributes[kv.key] = anyValue(kv.value);
  return attributes;
}

function anyValue(value: OtlpAnyValue | undefined): AttributeValue {
  if (!value) return null;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) {
    const big = BigInt(value.intValue);
    return big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(big)
      : big;
  }
  if (value.doubleValue !== undefined) return Number(value.doubleValue);
  if (value.arrayValue !== undefined) return list(value.arrayValue.values, "values").map(anyValue);
  if (value.kvlistValue !== undefined) return attributesOf(value.kvlistValue.values);
  if (value.bytesValue !== undefined) {
    return typeof value.bytesValue === "string"
      ? new Uint8Array(Buffer.from(value.bytesValue, "base64"))
      : value.bytesValue;
  }
  return null;
}
