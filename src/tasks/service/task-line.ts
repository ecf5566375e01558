import { traceIdOf } from "../../tracing/tracer.js";
import type { TaskRecord } from "../core/task-record.js";

/**
 * The fields every task line starts with (`task.submitted`, `task.started`,
 * `task.completed`, `task.failed`, `task.cancelled`): the task, its kind, who submitted
 * it (its `key_name`, never a key), its model and its trace. The replica is
 * the logger's own binding.
 */
export function taskLine(record: TaskRecord): Record<string, string | undefined> {
  return {
    task_id: record.id,
    // `generation`, `edit`, `response` (a background response).
    kind: record.kind ?? "generation",
    key_name: record.keyName,
    model: record.model,
    trace_id: traceIdOf(record.trace),
  };
}
