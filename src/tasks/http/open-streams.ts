import type { ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Metrics } from "../../metrics/create-metrics.js";
import type { TaskRecord } from "../core/task-record.js";
import type { TaskView } from "../view/present-task.js";

/** What the open streams share: how to show a task, the keep-alive, metrics and the log. */
export interface OpenStreamsDeps {
  /** The task as `GET` shows it, image links on `baseUrl`. */
  present(record: TaskRecord, baseUrl: string): Promise<TaskView>;
  /** A comment line this often keeps idle streams open through proxies. */
  keepAliveMs: number;
  metrics: Metrics;
  logger: Logger;
}

/**
 * The streams open in this process, and the one timer that writes their
 * keep-alive comments while any is open.
 */
export class OpenStreams {
  readonly open = new Set<ServerResponse>();
  /**
   * Streams in the middle of writing an event (its images come in pieces, with
   * waits): a keep-alive comment written then would land inside its `data:` line.
   */
  readonly writing = new WeakSet<ServerResponse>();
  private ticker: NodeJS.Timeout | undefined;

  constructor(readonly deps: OpenStreamsDeps) {}

  track(res: ServerResponse): void {
    this.open.add(res);
    this.deps.metrics.taskEventWatchers.inc();
    this.ticker ??= setInterval(() => {
      for (const stream of this.open) {
        if (!this.writing.has(stream)) stream.write(": keep-alive\n\n");
      }
    }, this.deps.keepAliveMs);
    this.ticker.unref();
  }

  untrack(res: ServerResponse): void {
    if (!this.open.delete(res)) return;
    this.deps.metrics.taskEventWatchers.dec();
    if (this.open.size === 0) {
      clearInterval(this.ticker);
      this.ticker = undefined;
    }
  }

  readonly onLateError = (err: unknown): void =>
    this.deps.logger.warn({ err }, "a task event stream ended early; its client resumes");
}
