import { spanNow } from "./span-clock.js";
import type { Span, SpanAttributes } from "./tracer.js";

/** An attribute value as a span keeps it (undefined ones are never kept). */
export type AttributeValue = string | number | boolean;

/** Attributes as a flat list: key, value, key, value; a key set again keeps its place. */
export type AttributeList = Array<string | AttributeValue>;

/** One span event. */
export interface RecordedEvent {
  name: string;
  time: number;
  attributes: AttributeList | undefined;
}

/** A span link: the caller's span, when its `traceparent` is only a hint. */
export interface RecordedLink {
  traceId: string;
  spanId: string;
  sampled: boolean;
}

/** Where a sampled span goes once it ended. */
export interface SpanSink {
  finish(span: RecordedSpan): void;
}

/** OpenTelemetry's default span limits, which the SDK applied. */
const MAX_ATTRIBUTES = 128;
const MAX_EVENTS = 128;

/**
 * A sampled span: plain fields, no closure, no copy of its attributes until
 * it is encoded. Calls after {@link end} are ignored, as the SDK ignores them.
 */
export class RecordedSpan implements Span {
  readonly start = spanNow();
  endTime = 0;
  attributes: AttributeList = [];
  events: RecordedEvent[] | undefined = undefined;
  /** Set by {@link setError}: the status is ERROR with this description. */
  errorDescription: string | undefined = undefined;
  droppedAttributes = 0;
  droppedEvents = 0;
  private ended = false;
  /** Made when first asked for: most server spans never are. */
  private header: string | undefined = undefined;

  constructor(
    private readonly sink: SpanSink,
    public name: string,
    /** OTLP's SpanKind number. */
    readonly kind: number,
    readonly traceId: string,
    readonly spanId: string,
    readonly parentSpanId: string | undefined,
    readonly link: RecordedLink | undefined,
    attributes: SpanAttributes | undefined,
  ) {
    if (attributes) this.setAttributes(attributes);
  }

  get traceparent(): string {
    return (this.header ??= `00-${this.traceId}-${this.spanId}-01`);
  }

  /** A child's parent context: sampled (an unsampled span is an {@link UnsampledSpan}). */
  get sampled(): boolean {
    return true;
  }

  setName(name: string): void {
    if (!this.ended) this.name = name;
  }

  setAttributes(attributes: SpanAttributes): void {
    if (this.ended) return;
    for (const key in attributes) {
      const value = attributes[key];
      if (value === undefined || value === null || key === "") continue;
      this.droppedAttributes += putAttribute(this.attributes, key, value);
    }
  }

  setAttribute(key: string, value: AttributeValue | undefined): void {
    if (this.ended || value === undefined || value === null || key === "") return;
    this.droppedAttributes += putAttribute(this.attributes, key, value);
  }

  addEvent(name: string, attributes?: SpanAttributes): void {
    if (this.ended) return;
    const events = (this.events ??= []);
    if (events.length >= MAX_EVENTS) {
      this.droppedEvents += 1;
      return;
    }
    let list: AttributeList | undefined;
    if (attributes) {
      list = [];
      for (const key in attributes) {
        const value = attributes[key];
        if (value !== undefined && value !== null && key !== "") putAttribute(list, key, value);
      }
    }
    events.push({ name, time: spanNow(), attributes: list });
  }

  setError(description: string): void {
    if (!this.ended) this.errorDescription = description;
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.endTime = spanNow();
    this.sink.finish(this);
  }
}

/** Sets `key` in `list`; returns 1 when it was dropped (a new key past the limit), else 0. */
function putAttribute(list: AttributeList, key: string, value: AttributeValue): number {
  for (let i = 0; i < list.length; i += 2) {
    if (list[i] === key) {
      list[i + 1] = value;
      return 0;
    }
  }
  if (list.length >= MAX_ATTRIBUTES * 2) return 1;
  list.push(key, value);
  return 0;
}

/**
 * A span that is not sampled: it carries its trace (log lines name it, a
 * channel is sent its `traceparent`, flag 00) and records nothing.
 */
export class UnsampledSpan implements Span {
  readonly traceparent: string;

  constructor(
    readonly traceId: string,
    readonly spanId: string,
  ) {
    this.traceparent = `00-${traceId}-${spanId}-00`;
  }

  /** A child's parent context: not sampled. */
  get sampled(): boolean {
    return false;
  }

  setName(): void {}
  setAttributes(): void {}
  setAttribute(): void {}
  addEvent(): void {}
  setError(): void {}
  end(): void {}
}
