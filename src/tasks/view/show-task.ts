import type { TaskDialect } from "../../contract/task-contract.js";
import type { TaskRecord } from "../core/task-record.js";
import { BIFROST_EVENT_FIELDS, presentBifrost, type BifrostView } from "./bifrost-view.js";
import { presentTask, type PresentDeps, type TaskView } from "./present-task.js";
import {
  SUB2API_EVENT_FIELDS,
  presentSub2api,
  type Sub2apiLimits,
  type Sub2apiView,
} from "./sub2api-view.js";

/** A task as one of the dialects shows it, `b64_json` payloads still to be read. */
export type ShownTask = TaskView | Sub2apiView | BifrostView;

/** What {@link showTask} needs: the native presenter's, and the limits sub2api's `expires_at` reads. */
export interface ShowDeps extends PresentDeps {
  limits: Sub2apiLimits;
}

/**
 * A task in `dialect`: its native view, or a dialect's presenter over it.
 * Every route, event and webhook that shows a task goes through here.
 */
export async function showTask(
  record: TaskRecord,
  deps: ShowDeps,
  dialect: TaskDialect,
): Promise<ShownTask> {
  const view = await presentTask(record, deps);
  if (dialect === "sub2api") return presentSub2api(record, view, deps.limits);
  if (dialect === "bifrost") return presentBifrost(record, view);
  return view;
}

/**
 * The dialect the service's own task routes (poll, wait, events, list,
 * cancel) show a task in: a sub2api task in sub2api's (its clients poll
 * `/v1/images/tasks/{id}`), every other natively (a Bifrost job too: its
 * dialect has routes of its own).
 */
export function nativeRouteDialect(record: Pick<TaskRecord, "dialect">): TaskDialect {
  return record.dialect === "sub2api" ? "sub2api" : "native";
}

/** The dialect a task's webhook event is in: the one it was submitted in. */
export function webhookDialect(record: Pick<TaskRecord, "dialect">): TaskDialect {
  return record.dialect ?? "native";
}

/** The fields a webhook event's `data` carries in each dialect (undefined: the native view's). */
export function eventFieldsOf(dialect: TaskDialect): readonly string[] | undefined {
  if (dialect === "sub2api") return SUB2API_EVENT_FIELDS;
  if (dialect === "bifrost") return BIFROST_EVENT_FIELDS;
  return undefined;
}
