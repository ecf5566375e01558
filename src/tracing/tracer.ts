/** Attribute values a span takes; `undefined` ones are left out. */
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

/** What kind of span, as OpenTelemetry names them. */
export type SpanKind = "server" | "client" | "internal" | "producer" | "consumer";

/** One operation in a trace. */
export interface Span {
  /** The trace's id (32 hex), "" when tracing is off. */
  readonly traceId: string;
  /**
   * This span as a W3C `traceparent` header, "" when tracing is off: what a
   * request to a channel carries, and what a task keeps so that the replica
   * that runs it continues the trace.
   */
  readonly traceparent: string;
  /** Renames the span (a server span learns its route once a router matched it). */
  setName(name: string): void;
  setAttributes(attributes: SpanAttributes): void;
  /** One attribute, as {@link setAttributes} sets it, without an object to hold it. */
  setAttribute(key: string, value: string | number | boolean | undefined): void;
  addEvent(name: string, attributes?: SpanAttributes): void;
  /** Marks the span failed, with a short description (never a key or a prompt). */
  setError(description: string): void;
  end(): void;
}

/** Options of {@link Tracer.startSpan}. */
export interface StartSpanOptions {
  kind: SpanKind;
  /**
   * The parent: a span of this tracer (read in place), or a `traceparent` the
   * service made (one a task kept); none, or a span of a tracer that is off,
   * starts a trace.
   */
  parent?: Span | string | undefined;
  /**
   * A `traceparent` a client sent: a hint. Continued only when the tracer
   * trusts callers (`tracing.trustParent`); otherwise the span starts a new
   * trace, sampled by the service's own sampler, with a link to it.
   */
  callerParent?: string | undefined;
  attributes?: SpanAttributes;
}

/**
 * The service's tracing seam: every span the service makes goes through it.
 * Off (no OTLP endpoint set), it is {@link NOOP_TRACER}: no SDK is loaded,
 * and callers check {@link enabled} before building attributes.
 */
export interface Tracer {
  readonly enabled: boolean;
  startSpan(name: string, options: StartSpanOptions): Span;
  /** Sends what is buffered and stops (at shutdown). */
  shutdown(): Promise<void>;
}

/** The span of a tracer that is off: one shared object, every call a no-op. */
export const NOOP_SPAN: Span = {
  traceId: "",
  traceparent: "",
  setName: () => undefined,
  setAttributes: () => undefined,
  setAttribute: () => undefined,
  addEvent: () => undefined,
  setError: () => undefined,
  end: () => undefined,
};

/** Tracing off: costs a property read per call site. */
export const NOOP_TRACER: Tracer = {
  enabled: false,
  startSpan: () => NOOP_SPAN,
  shutdown: async () => undefined,
};

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A W3C `traceparent` header's parts, or undefined when it is not one (or is all zeros). */
export function parseTraceparent(
  value: string | string[] | undefined,
): { traceId: string; spanId: string; sampled: boolean } | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  // The service's own (each client span's parent): read in place, no regular expression.
  if (text?.length === 55 && isPlain(text)) {
    const traceId = text.slice(3, 35);
    const spanId = text.slice(36, 52);
    if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
    return { traceId, spanId, sampled: (hexValue(text.charCodeAt(54)) & 1) === 1 };
  }
  const match = text ? TRACEPARENT.exec(text.trim().toLowerCase()) : null;
  if (!match) return undefined;
  const [, traceId, spanId, flags] = match as unknown as [string, string, string, string];
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId, sampled: (Number.parseInt(flags, 16) & 1) === 1 };
}

const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);

/** Whether `text` (55 characters) is a version-00 `traceparent` in lower case, as it is sent. */
function isPlain(text: string): boolean {
  if (text.charCodeAt(0) !== 48 || text.charCodeAt(1) !== 48) return false;
  for (let i = 2; i < 55; i++) {
    const code = text.charCodeAt(i);
    if (i === 2 || i === 35 || i === 52 ? code !== 45 : hexValue(code) < 0) return false;
  }
  return true;
}

/** A lower-case hex digit's value, or -1. */
function hexValue(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 97 && code <= 102) return code - 87;
  return -1;
}

/** The trace id a `traceparent` names, or undefined. */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  return parseTraceparent(traceparent)?.traceId;
}
