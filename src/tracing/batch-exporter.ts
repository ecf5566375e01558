import type { ExportPoster } from "./post-export.js";
import type { RecordedSpan, SpanSink } from "./recorded-span.js";
import type { BatchFormat, SpanBatch } from "./span-batch.js";

/** How spans are batched and sent (OpenTelemetry's BatchSpanProcessor's knobs). */
export interface BatchLimits {
  /** Spans waiting (not counting a batch being sent); past it, spans are dropped. */
  maxQueueSize: number;
  /** Spans per export request. */
  maxBatchSize: number;
  /** How long a span may wait for a batch to fill, in ms. */
  delayMs: number;
  /** Deadline of one export request, in ms. */
  timeoutMs: number;
}

/** Where the exporter says that spans were lost (each trouble at most once a minute). */
export interface ExportWarnings {
  warn(fields: Record<string, unknown>, message: string): void;
}

/** Retries of a batch the collector could not take, after 1 s then 2 s. */
const RETRY_DELAYS_MS = [1000, 2000];
/** A collector's `Retry-After` is followed up to this. */
const MAX_RETRY_WAIT_MS = 5000;
const WARN_EVERY_MS = 60_000;
/** How long a shutdown waits for the last batches. */
const SHUTDOWN_DEADLINE_MS = 3000;

/**
 * Spans encoded into batches as they end, sent off the request path: a batch
 * goes when it holds `maxBatchSize` spans or its first span waited `delayMs`,
 * one request at a time; while one is sent (or retried), full batches wait,
 * up to `maxQueueSize` spans, and spans past that are dropped and counted.
 */
export class BatchExporter implements SpanSink {
  private current: SpanBatch;
  private readonly full: SpanBatch[] = [];
  private readonly spare: SpanBatch[] = [];
  private queued = 0;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | undefined;
  private stopping = false;
  private dropped = 0;
  private failedBatches = 0;
  private lastWarned = { dropped: -Infinity, failed: -Infinity };

  constructor(
    private readonly format: BatchFormat,
    private readonly poster: ExportPoster,
    private readonly limits: BatchLimits,
    private readonly warnings: ExportWarnings | undefined,
  ) {
    this.current = format.newBatch();
  }

  finish(span: RecordedSpan): void {
    if (this.queued >= this.limits.maxQueueSize) {
      this.dropped += 1;
      this.warnAtMostOnceAMinute("dropped");
      return;
    }
    this.current.add(span);
    this.queued += 1;
    if (this.current.count >= this.limits.maxBatchSize) {
      this.cut();
    } else if (!this.timer && !this.stopping) {
      this.timer = setTimeout(() => this.cut(), this.limits.delayMs).unref();
    }
  }

  /** Sends what is queued, waiting at most a few seconds; then drops the connection. */
  async shutdown(): Promise<void> {
    this.stopping = true;
    this.cut();
    let deadline: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      deadline = setTimeout(resolve, SHUTDOWN_DEADLINE_MS);
    });
    await Promise.race([this.drained(), late]);
    clearTimeout(deadline);
    this.poster.close();
  }

  private async drained(): Promise<void> {
    while (this.sending) await this.sending;
  }

  /** Ends the current batch: it joins the full ones, and sending starts if idle. */
  private cut(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.current.count > 0) {
      this.full.push(this.current);
      this.current = this.spare.pop() ?? this.format.newBatch();
    }
    this.pump();
  }

  /** Starts sending the full batches unless a send is under way. */
  private pump(): void {
    if (this.sending || this.full.length === 0) return;
    this.sending = this.sendAll().finally(() => {
      this.sending = undefined;
      // A batch cut after the loop's last look.
      this.pump();
    });
  }

  private async sendAll(): Promise<void> {
    let batch: SpanBatch | undefined;
    while ((batch = this.full.shift())) {
      await this.send(batch);
      this.queued -= batch.count;
      batch.reset();
      if (this.spare.length < 2) this.spare.push(batch);
    }
  }

  private async send(batch: SpanBatch): Promise<void> {
    const body = batch.body();
    for (let attempt = 0; ; attempt++) {
      const outcome = await this.poster.post(body, this.limits.timeoutMs);
      if (outcome.ok) return;
      const delay = RETRY_DELAYS_MS[attempt];
      if (!outcome.retryable || delay === undefined || this.stopping) {
        this.failedBatches += 1;
        this.warnAtMostOnceAMinute("failed", outcome.reason, batch.count);
        return;
      }
      const wait = Math.min(outcome.retryAfterMs ?? delay, MAX_RETRY_WAIT_MS);
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  private warnAtMostOnceAMinute(
    trouble: "dropped" | "failed",
    reason?: string,
    spans?: number,
  ): void {
    const now = Date.now();
    if (!this.warnings || now - this.lastWarned[trouble] < WARN_EVERY_MS) return;
    this.lastWarned[trouble] = now;
    if (trouble === "dropped") {
      this.warnings.warn(
        { spans_dropped: this.dropped },
        "tracing: the span queue is full; spans are dropped",
      );
    } else {
      this.warnings.warn(
        { reason, spans, batches_failed: this.failedBatches },
        "tracing: a batch of spans could not be exported",
      );
    }
  }
}
