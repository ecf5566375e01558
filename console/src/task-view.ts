import { ApiError, isAbort, type Api } from "./api.js";
import { confirmDialog } from "./confirm-dialog.js";
import { copyText } from "./copy-text.js";
import { h, replaceChildren } from "./dom.js";
import { createTaskPanel, type TaskPanel } from "./task-panel.js";
import type { Task } from "./task-types.js";

export interface TaskViewOptions {
  api: Api;
  id: string;
  onUnauthorized(error: ApiError): void;
  /** "Use these settings": the form, filled as this task was submitted. */
  onUseSettings(task: Task): void;
  /** "Edit image N": an edit of that image. */
  onEditImage(task: Task, index: number): void;
  /** The task was deleted. */
  onDeleted(task: Task): void;
  /** Where "← Gallery" goes: the gallery's page last shown. */
  galleryHash: string;
}

/**
 * One task's page: everything about it, followed live while it runs, and
 * what can be done with it: make it again, edit one of its images, copy its
 * prompt, delete it.
 */
export function createTaskView(options: TaskViewOptions) {
  const heading = h("h2", { id: "task-heading", tabindex: "-1" }, "Task");
  const body = h("div", { class: "task-body" }, h("p", { role: "status" }, "Loading…"));
  const element = h(
    "section",
    { class: "task-view panel", "aria-labelledby": "task-heading" },
    h("p", {}, h("a", { href: options.galleryHash, class: "back" }, "← Gallery")),
    heading,
    body,
  );
  const controller = new AbortController();
  let panel: TaskPanel | undefined;
  options.api
    .get(options.id, controller.signal)
    .then((task) => {
      panel = createTaskPanel({
        api: options.api,
        task,
        onUnauthorized: options.onUnauthorized,
        onEditImage: options.onEditImage,
        actions: taskActions(options, () => panel!),
      });
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
            ? "No such task: it may have expired, been deleted, or belong to another key."
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

/** The task page's own buttons, beside Cancel. */
function taskActions(options: TaskViewOptions, panel: () => TaskPanel): HTMLElement[] {
  const use = h("button", { type: "button", class: "secondary" }, "Use these settings");
  const copy = h("button", { type: "button", class: "secondary" }, "Copy prompt");
  const remove = h("button", { type: "button", class: "danger" }, "Delete task");
  const note = h("span", { class: "hint", role: "status" });
  use.addEventListener("click", () => options.onUseSettings(panel().task()));
  copy.addEventListener("click", () => {
    void copyText(panel().task().prompt ?? "").then((copied) => {
      note.textContent = copied ? "Prompt copied." : "The browser did not allow copying.";
    });
  });
  remove.addEventListener("click", () => void deleteTask(options, panel(), note));
  return [use, copy, remove, note];
}

async function deleteTask(options: TaskViewOptions, panel: TaskPanel, note: HTMLElement) {
  const task = panel.task();
  const sure = await confirmDialog({
    title: "Delete this task?",
    message:
      "The task and its images are deleted at once, and their links stop working. " +
      "A task still running is cancelled first.",
    confirm: "Delete",
  });
  if (!sure) return;
  note.textContent = "Deleting…";
  try {
    await options.api.remove(task.id);
    panel.dispose();
    options.onDeleted(task);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return options.onUnauthorized(err);
    note.textContent = `Not deleted: ${err instanceof Error ? err.message : String(err)}`;
  }
}
