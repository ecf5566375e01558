import { traceIdOf } from "../../tracing/tracer.js";
import type { TaskRecord } from "../core/task-record.js";

/**
 * The fields every task line starts with (`task.submitted`, `task.started`,
 * `task.completed`, `task.failed`, `task.cancelled`): the task, its kind, who
 * submitted it (its `key_name`, never a key), the `req_id` of the request that
 * caused the line (the submission's, unless another request ended the task: a
 * cancel), its model and its trace. The replica is the logger's own binding.
 */
export function taskLine(
  record: TaskRecord,
  reqId: string | undefined = record.reqId,
): Record<string, string | undefined> {
  return {
    task_id: record.id,
    req_id: reqId,
    // `generation`, `edit`, `response` (a background response).
    kind: record.kind ?? "generation",
    key_name: record.keyName,
    model: record.model,
    trace_id: traceIdOf(record.trace),
  };
}
