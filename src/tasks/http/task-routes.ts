import type { RouteDef } from "../../http/route-table.js";

/** What each task route does; the lane has one handler per name. */
export type TaskRouteName =
  "submit" | "submit_edit" | "list" | "get" | "events" | "cancel" | "delete";

/** One route of the task API. */
export interface TaskRoute extends RouteDef {
  name: TaskRouteName;
}

const route = (name: TaskRouteName, method: TaskRoute["method"], template: string): TaskRoute => ({
  name,
  method,
  template,
});

/**
 * The task API, declared once: the task lane serves every route here (`HEAD`
 * as `GET`, literal segments in any letter case, one trailing `/`), and
 * nothing else serves them. `:taskId` takes one segment.
 */
export const TASK_ROUTES: readonly TaskRoute[] = [
  route("submit", "POST", "/v1/images/tasks"),
  route("submit_edit", "POST", "/v1/images/edits/tasks"),
  route("list", "GET", "/v1/images/tasks"),
  route("get", "GET", "/v1/images/tasks/:taskId"),
  route("events", "GET", "/v1/images/tasks/:taskId/events"),
  route("cancel", "POST", "/v1/images/tasks/:taskId/cancel"),
  route("delete", "DELETE", "/v1/images/tasks/:taskId"),
];
