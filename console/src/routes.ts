import { firstPage, type Paging } from "./paging.js";
import { TASK_ID, TASK_STATUSES, type TaskStatus } from "./task-types.js";

/**
 * The console's pages: the `#` part of its URL, so that Back, a reload and a
 * shared link land on the same page. The gallery's place (its filter and
 * cursor) is in it too.
 */
export type Route =
  { name: "create" } | { name: "gallery"; paging: Paging } | { name: "task"; id: string };

/**
 * The page a `location.hash` names; anything unknown is the create page. A
 * gallery query that does not hold together (a malformed id, an unknown
 * status) falls back to as much of it as does.
 */
export function parseRoute(hash: string): Route {
  const [path = "", query = ""] = hash.replace(/^#/, "").split("?", 2);
  if (path === "/gallery") return { name: "gallery", paging: parsePaging(query) };
  const task = /^\/tasks\/([^/?#]+)$/.exec(path);
  if (task && TASK_ID.test(task[1]!)) return { name: "task", id: task[1]! };
  return { name: "create" };
}

/** The `#` URL of a page. */
export function routeHash(route: Route): string {
  if (route.name === "gallery") {
    const query = pagingQuery(route.paging).toString();
    return `#/gallery${query ? `?${query}` : ""}`;
  }
  if (route.name === "task") return `#/tasks/${route.id}`;
  return "#/new";
}

/** The gallery's first page, unfiltered. */
export const GALLERY: Route = { name: "gallery", paging: firstPage() };

/**
 * `status`, `order` (`asc` when oldest first), `after` (this page's cursor)
 * and `trail` (the cursors of the pages between the first and this one,
 * comma-separated), so that going back works after a reload too.
 */
function pagingQuery(paging: Paging): URLSearchParams {
  const query = new URLSearchParams();
  if (paging.status) query.set("status", paging.status);
  if (paging.oldestFirst) query.set("order", "asc");
  if (paging.after) {
    query.set("after", paging.after);
    const trail = paging.previous.slice(1);
    if (trail.length > 0) query.set("trail", trail.join(","));
  }
  return query;
}

function parsePaging(text: string): Paging {
  const query = new URLSearchParams(text);
  const statusText = query.get("status") ?? "";
  const status = (TASK_STATUSES as readonly string[]).includes(statusText)
    ? (statusText as TaskStatus)
    : undefined;
  const oldestFirst = query.get("order") === "asc";
  const after = query.get("after") ?? "";
  if (!TASK_ID.test(after)) return firstPage(status, oldestFirst);
  const trail = (query.get("trail") ?? "").split(",").filter((id) => id !== "");
  // A trail with one bad id cannot lead back: this page still opens, as page 2.
  const previous = trail.every((id) => TASK_ID.test(id)) ? [undefined, ...trail] : [undefined];
  return { ...firstPage(status, oldestFirst), previous, after };
}
