import type { ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { TaskRecord } from "../core/task-record.js";
import type { ShownTask } from "../view/show-task.js";

/** What the open streams share: how to show a task, the keep-alive, metrics and the log. */
export interface OpenStreamsDeps {
  /** The task as `GET` shows it (in its dialect), image links on `baseUrl`. */
  present(record: TaskRecord, baseUrl: string): Promise<ShownTask>;
  /** A comment line this often keeps idle streams open through proxies. */
  keepAliveMs: number;
  /**
   * A stream whose writes have waited this long on a client that reads
   * nothing is cut (`events.slowReaderSec`).
   */
  slowReaderMs: number;
  metrics: Metrics;
  logger: Logger;
}

/** Why the service cut a stream, as metrics label it. */
export type StreamCut = "slow_reader" | "unread_bytes";

/** How often streams are checked for a client that stopped reading. */
const SLOW_READER_SWEEP_MS = 1000;

/**
 * The streams open in this process, the one timer that writes their
 * keep-alive comments while any is open, and the one that cuts a stream
 * whose client stopped reading.
 */
export class OpenStreams {
  readonly open = new Set<ServerResponse>();
  /**
   * Streams in the middle of writing an event (its images come in pieces, with
   * waits): a keep-alive comment written then would land inside its `data:` line.
   */
  readonly writing = new WeakSet<ServerResponse>();
  /** Since when each stream's writes have waited on a full socket (seen by a sweep). */
  private readonly waitingSince = new Map<ServerResponse, number>();
  private ticker: NodeJS.Timeout | undefined;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(readonly deps: OpenStreamsDeps) {}

  track(res: ServerResponse): void {
    this.open.add(res);
    this.deps.metrics.taskEventWatchers.inc();
    res.on("drain", () => this.waitingSince.delete(res));
    this.ticker ??= setInterval(() => {
      for (const stream of this.open) {
        if (!this.writing.has(stream)) stream.write(": keep-alive\n\n");
      }
    }, this.deps.keepAliveMs);
    this.ticker.unref();
    this.sweeper ??= setInterval(() => this.cutSlowReaders(), SLOW_READER_SWEEP_MS);
    this.sweeper.unref();
  }

  untrack(res: ServerResponse): void {
    if (!this.open.delete(res)) return;
    this.waitingSince.delete(res);
    this.deps.metrics.taskEventWatchers.dec();
    if (this.open.size === 0) {
      clearInterval(this.ticker);
      clearInterval(this.sweeper);
      this.ticker = undefined;
      this.sweeper = undefined;
    }
  }

  /**
   * Cuts a stream the service has given up on: its connection closes, which
   * aborts the event being written and destroys the image it was reading.
   */
  cut(res: ServerResponse, reason: StreamCut): void {
    this.deps.metrics.taskEventWatchersCut.inc({ reason });
    res.destroy();
  }

  /**
   * A client that reads nothing holds its stream's memory, and while an event
   * with images is written, an open image: its stream is cut once a write has
   * waited `slowReaderMs` for the socket to drain. A slow client that reads
   * drains now and then and is never cut.
   */
  private cutSlowReaders(): void {
    const now = performance.now();
    for (const res of this.open) {
      if (!res.writableNeedDrain) {
        this.waitingSince.delete(res);
        continue;
      }
      const since = this.waitingSince.get(res);
      if (since === undefined) this.waitingSince.set(res, now);
      else if (now - since >= this.deps.slowReaderMs) this.cut(res, "slow_reader");
    }
  }

  readonly onLateError = (err: unknown): void =>
    this.deps.logger.warn({ err }, "a task event stream ended early; its client resumes");
}
