import { isFinished, type TaskRecord } from "../core/task-record.js";

/**
 * The headers of every answer that shows a task: never cached, and while it
 * is unfinished, `Retry-After` with the configured poll interval.
 */
export function pollHeaders(record: TaskRecord, pollIntervalSec: number): Record<string, string> {
  return isFinished(record.status)
    ? { "Cache-Control": "no-store" }
    : { "Cache-Control": "no-store", "Retry-After": String(pollIntervalSec) };
}
