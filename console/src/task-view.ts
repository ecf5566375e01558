import { ApiError, isAbort, type Api } from "./api.js";
import { h, replaceChildren } from "./dom.js";
import { routeHash } from "./routes.js";
import { createTaskPanel, type TaskPanel } from "./task-panel.js";

export interface TaskViewOptions {
  api: Api;
  id: string;
  onUnauthorized(error: ApiError): void;
}

/** One task's page: everything about it, followed live while it runs. */
export function createTaskView(options: TaskViewOptions) {
  const heading = h("h2", { id: "task-heading", tabindex: "-1" }, "Task");
  const body = h("div", { class: "task-body" }, h("p", { role: "status" }, "Loading…"));
  const element = h(
    "section",
    { class: "task-view panel", "aria-labelledby": "task-heading" },
    h("p", {}, h("a", { href: routeHash({ name: "gallery" }), class: "back" }, "← Gallery")),
    heading,
    body,
  );
  const controller = new AbortController();
  let panel: TaskPanel | undefined;
  options.api
    .get(options.id, controller.signal)
    .then((task) => {
      panel = createTaskPanel({ api: options.api, task, onUnauthorized: options.onUnauthorized });
      replaceChildren(body, panel.element);
    })
    .catch((err: unknown) => {
      if (isAbort(err)) return;
      if (err instanceof ApiError && err.status === 401) return options.onUnauthorized(err);
      const gone = err instanceof ApiError && err.status === 404;
      replaceChildren(
        body,
        h(
          "p",
          { class: "error-box", role: "alert" },
          gone
            ? "No such task: it may have expired, or belong to another key."
            : err instanceof Error
              ? err.message
              : "The task could not be read.",
        ),
      );
    });
  return {
    element,
    heading,
    dispose() {
      controller.abort();
      panel?.dispose();
    },
  };
}
