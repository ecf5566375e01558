import type { RecordedSpan } from "./recorded-span.js";

/** Spans encoded as they end, for one export request. */
export interface SpanBatch {
  /** How many spans it holds. */
  readonly count: number;
  /** Encodes a span that ended into the batch. */
  add(span: RecordedSpan): void;
  /** The export request's body: an ExportTraceServiceRequest of every span added. */
  body(): Buffer;
  /** Empties the batch for reuse, once its body was sent. */
  reset(): void;
}

/** An OTLP encoding: its content type and its batches. */
export interface BatchFormat {
  contentType: string;
  newBatch(): SpanBatch;
}

/** What every export request names besides its spans. */
export interface ExportIdentity {
  /** The resource's attributes (`service.name`, `service.instance.id`, ...). */
  resource: Record<string, string>;
  /** The instrumentation scope's name. */
  scope: string;
}

/** OTLP's SpanKind numbers, by the port's names. */
export const OTLP_KINDS = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

/** OTLP span flags: the context's remoteness is known (and whether it is remote). */
export const FLAGS_HAS_IS_REMOTE = 0x100;
export const FLAGS_IS_REMOTE = 0x200;

/**
 * A span's OTLP `flags`, as the SDK wrote them: sampled, and whether its parent is
 * remote (every parent is a `traceparent`, which the SDK took as remote).
 */
export function spanFlags(span: RecordedSpan): number {
  return 1 | FLAGS_HAS_IS_REMOTE | (span.parentSpanId ? FLAGS_IS_REMOTE : 0);
}
