/** What each task route does; the lane has one handler per name. */
export type TaskRouteName = "submit" | "submit_edit" | "list" | "get" | "events" | "cancel";

/** One route of the task API. */
export interface TaskRoute {
  name: TaskRouteName;
  method: "GET" | "POST";
  /** The route's template, as metrics and logs name it (never a raw task id). */
  template: string;
  /** The path's segments after `/v1/images/`; `:taskId` takes one segment. */
  segments: readonly string[];
}

const route = (name: TaskRouteName, method: TaskRoute["method"], template: string): TaskRoute => ({
  name,
  method,
  template,
  segments: template.split("/").slice(3),
});

/**
 * The task API, declared once: the task lane serves every route here (`HEAD`
 * as `GET`), and nothing else serves them.
 */
export const TASK_ROUTES: readonly TaskRoute[] = [
  route("submit", "POST", "/v1/images/tasks"),
  route("submit_edit", "POST", "/v1/images/edits/tasks"),
  route("list", "GET", "/v1/images/tasks"),
  route("get", "GET", "/v1/images/tasks/:taskId"),
  route("events", "GET", "/v1/images/tasks/:taskId/events"),
  route("cancel", "POST", "/v1/images/tasks/:taskId/cancel"),
];

/** A request matched to a task route. */
export interface TaskRouteMatch {
  route: TaskRoute;
  /** The `:taskId` segment as sent (still percent-encoded). */
  rawTaskId?: string;
}

/**
 * The task route of a request path (without its query), matched as the
 * routers clients know do it: literal segments in any letter case, one
 * trailing `/` allowed, `:taskId` one non-empty segment. `undefined` for any
 * other path or method (the caller answers 404).
 */
export function matchTaskRoute(method: string, path: string): TaskRouteMatch | undefined {
  const verb = method === "HEAD" ? "GET" : method;
  if (verb !== "GET" && verb !== "POST") return undefined;
  const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
  const parts = trimmed.split("/");
  // "", "v1", "images", ...
  if (parts.length < 4 || parts[0] !== "" || !same(parts[1], "v1") || !same(parts[2], "images")) {
    return undefined;
  }
  const rest = parts.slice(3);
  for (const candidate of TASK_ROUTES) {
    if (candidate.method !== verb || candidate.segments.length !== rest.length) continue;
    let rawTaskId: string | undefined;
    const fits = candidate.segments.every((segment, index) => {
      const part = rest[index] as string;
      if (segment !== ":taskId") return same(part, segment);
      rawTaskId = part;
      return part !== "";
    });
    if (fits)
      return rawTaskId === undefined ? { route: candidate } : { route: candidate, rawTaskId };
  }
  return undefined;
}

function same(part: string | undefined, literal: string): boolean {
  return part !== undefined && part.length === literal.length && part.toLowerCase() === literal;
}
