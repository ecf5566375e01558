import { ApiError, isAbort, type Api } from "./api.js";
import { h, replaceChildren, type Child } from "./dom.js";
import { detailRows, formatDuration, imageSource, statusLabel, statusTone } from "./format.js";
import { fetchableImages } from "./image-bytes.js";
import { createImageViewer } from "./image-viewer.js";
import { resultNodes, type ResultsOptions } from "./task-results.js";
import { isFinished, type Task } from "./task-types.js";
import { watchTask, type WatchState } from "./watch-task.js";

export interface TaskPanelOptions {
  api: Api;
  task: Task;
  /** The key was refused (401): the console signs out. */
  onUnauthorized(error: ApiError): void;
  /** More controls beside Cancel (the focus goes to the first after a cancel). */
  actions?: Child[];
  /** "Edit image N" on each image of a finished task, when given. */
  onEditImage?(task: Task, index: number): void;
}

/** A task on screen, following it live until it finishes. */
export interface TaskPanel {
  element: HTMLElement;
  /** The task as last seen. */
  task(): Task;
  /** Stops following the task (the page goes away). */
  dispose(): void;
}

/**
 * A task as the console shows it: status, prompt, the latest partial image
 * while it runs and then its images to download, or its error; its
 * parameters and timings; and a Cancel button while it can be cancelled.
 * An unfinished task is followed over its event stream. The parts are made
 * once and updated in place, so the image shown does not flicker and the
 * keyboard focus stays where it was.
 */
export function createTaskPanel(options: TaskPanelOptions): TaskPanel {
  const { api, onEditImage } = options;
  const controller = new AbortController();
  const ui = panelLayout(options);
  const viewer = createImageViewer(
    onEditImage ? { onEdit: (index) => onEditImage(state.task, index) } : {},
  );
  const results: ResultsOptions = {
    fetchable: (task) => fetchableImages(api, task),
    view: (images, index, from) => viewer.open(images, index, from),
    ...(onEditImage ? { onEditImage: (index: number) => onEditImage(state.task, index) } : {}),
  };

  let state: WatchState = { task: options.task };
  let shownPreview = "";
  const render = () => (shownPreview = renderTask(ui, state, results, shownPreview));
  const update = (next: WatchState) => {
    state = next;
    render();
  };
  const fail = (err: unknown) => {
    if (isAbort(err) || controller.signal.aborted) return;
    if (err instanceof ApiError && err.status === 401) return options.onUnauthorized(err);
    ui.status.textContent = err instanceof Error ? err.message : "Something went wrong.";
  };

  let cancelling = false;
  ui.cancel.addEventListener("click", () => {
    if (cancelling) return;
    cancelling = true;
    ui.cancel.setAttribute("aria-busy", "true");
    api
      .cancel(state.task.id)
      .then((task) => update({ task }))
      .catch(fail)
      .finally(() => {
        cancelling = false;
        ui.cancel.removeAttribute("aria-busy");
      });
  });

  render();
  if (!isFinished(state.task.status)) {
    watchTask({ api, task: state.task, onChange: update, signal: controller.signal })
      .then(update)
      .catch(fail);
  }
  return {
    element: ui.element,
    task: () => state.task,
    dispose() {
      controller.abort();
      viewer.dispose();
    },
  };
}

/** The panel's parts, made once and updated in place by {@link renderTask}. */
function panelLayout(options: TaskPanelOptions) {
  const badge = h("span", { class: "badge" });
  const idLine = h("code", { class: "task-id" }, options.task.id);
  const prompt = h("p", { class: "prompt" });
  const status = h("p", { class: "status-line", role: "status" });
  const preview = h("div", { class: "preview" });
  const problem = h("div", { class: "error-box", hidden: true });
  const details = h("dl", { class: "details" });
  const cancel = h("button", { type: "button", class: "secondary" }, "Cancel task");
  const actions = h("div", { class: "actions" }, cancel, ...(options.actions ?? []));
  const element = h(
    "article",
    { class: "task-panel", "aria-label": "Task" },
    h("div", { class: "task-head" }, badge, idLine),
    prompt,
    status,
    problem,
    actions,
    preview,
    details,
  );
  return { element, badge, prompt, status, preview, problem, details, cancel, actions };
}

/**
 * Shows `state` in the panel. The preview is drawn again only when what it
 * shows changed (`shownPreview`, the key of what it shows now), so the image
 * does not flicker; returns the key of what it shows after.
 */
function renderTask(
  ui: ReturnType<typeof panelLayout>,
  state: WatchState,
  results: ResultsOptions,
  shownPreview: string,
): string {
  const { task } = state;
  const { badge, prompt, status, preview, problem, details, cancel, actions } = ui;
  badge.className = `badge badge-${statusTone(task)}`;
  badge.textContent = statusLabel(task);
  prompt.textContent = task.prompt ?? "";
  prompt.hidden = task.prompt === undefined;
  status.textContent = statusText(state);
  const key = previewKey(state);
  if (key !== shownPreview) replaceChildren(preview, ...previewNodes(state, results));
  problem.hidden = !task.error;
  if (task.error) {
    replaceChildren(
      problem,
      h("strong", {}, task.error.code),
      " ",
      h("span", {}, task.error.message),
    );
  }
  const focused = document.activeElement === cancel;
  cancel.hidden = isFinished(task.status);
  // Cancel pressed, or the task ended under the focus: it stays on a control on screen.
  if (cancel.hidden && focused) focusFirstVisible(actions, status);
  replaceChildren(
    details,
    ...detailRows(task).flatMap(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]),
  );
  return key;
}

/** Focuses the first visible control in `within`, else `fallback` (made focusable). */
function focusFirstVisible(within: HTMLElement, fallback: HTMLElement): void {
  const control = [...within.querySelectorAll<HTMLElement>("button, a[href]")].find(
    (node) => node.getClientRects().length > 0 && !(node as HTMLButtonElement).disabled,
  );
  if (control) return control.focus();
  fallback.tabIndex = -1;
  fallback.focus();
}

/** One line on where the task stands, read out by screen readers as it changes. */
function statusText({ task, partial }: WatchState): string {
  const asked = task.parameters?.partial_images;
  switch (task.status) {
    case "queued":
      return "Waiting for a free slot…";
    case "in_progress":
      if (partial) return `Partial image ${partial.index + 1}${asked ? ` of ${asked}` : ""}…`;
      return "Making the image…";
    case "completed": {
      const count = task.data?.length ?? 0;
      const took =
        task.completed_at !== undefined && task.started_at !== undefined
          ? ` in ${formatDuration(task.completed_at - task.started_at)}`
          : "";
      return `Done${took}: ${count} image${count === 1 ? "" : "s"}.`;
    }
    default:
      return task.error?.code === "cancelled" ? "Cancelled." : "Failed.";
  }
}

function previewKey({ task, partial }: WatchState): string {
  if (task.status === "completed") return `done:${(task.data ?? []).map(imageSource).join(" ")}`;
  if (partial) return `partial:${partial.index}:${imageSource(partial)}`;
  return isFinished(task.status) ? "none" : "waiting";
}

/** The latest partial image while it runs, the results when done. */
function previewNodes({ task, partial }: WatchState, results: ResultsOptions): Node[] {
  const about = task.prompt ? `: ${task.prompt.slice(0, 120)}` : "";
  if (task.status === "completed") return resultNodes(task, results);
  const source = partial ? imageSource(partial) : undefined;
  if (partial && source) {
    const label = `Partial image ${partial.index + 1}`;
    return [
      h(
        "figure",
        { class: "partial" },
        h("img", { src: source, alt: `${label}${about}`, "data-kind": "partial" }),
        h("figcaption", {}, label),
      ),
    ];
  }
  if (isFinished(task.status)) return [];
  return [h("div", { class: "placeholder", "aria-hidden": "true" })];
}
