import { TASK_ID } from "./task-types.js";

/** The console's pages: the `#` part of its URL, so that Back and links work. */
export type Route = { name: "create" } | { name: "gallery" } | { name: "task"; id: string };

/** The page a `location.hash` names; anything unknown is the create page. */
export function parseRoute(hash: string): Route {
  const path = hash.replace(/^#/, "");
  if (path === "/gallery") return { name: "gallery" };
  const task = /^\/tasks\/([^/?#]+)$/.exec(path);
  if (task && TASK_ID.test(task[1]!)) return { name: "task", id: task[1]! };
  return { name: "create" };
}

/** The `#` URL of a page. */
export function routeHash(route: Route): string {
  if (route.name === "gallery") return "#/gallery";
  if (route.name === "task") return `#/tasks/${route.id}`;
  return "#/new";
}
