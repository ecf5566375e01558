import type { Principal } from "../../auth/principal.js";
import { ServiceError } from "../../errors/service-error.js";
import type { TaskStore } from "../core/task-store.js";
import { available } from "../../errors/store-unavailable.js";
import { isAnyTaskId } from "../../contract/task-contract.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";

/**
 * Reads a task the principal owns. An id of another shape, another key's
 * task and an expired one are the same 404, so nobody learns which ids exist.
 */
export async function readOwnedTask(
  store: TaskStore,
  principal: Principal,
  id: string,
  nowSec: number,
): Promise<TaskRecord> {
  const notFound = () =>
    new ServiceError("task_not_found", `No task found with id '${id.slice(0, 80)}'.`, {
      param: "task_id",
    });
  if (!isAnyTaskId(id)) throw notFound();
  const record = await available(() => store.get(id));
  if (!record || record.owner !== principal.subject) throw notFound();
  if (isFinished(record.status) && record.expires_at !== undefined && record.expires_at <= nowSec) {
    throw notFound();
  }
  return record;
}
