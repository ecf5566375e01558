import { ApiError, isAbort, type Api } from "./api.js";
import { field, h, replaceChildren, select } from "./dom.js";
import { formatTime, imageSource, statusLabel, statusTone } from "./format.js";
import { firstPage, listQuery, nextPage, pageNumber, previousPage, type Paging } from "./paging.js";
import { routeHash } from "./routes.js";
import { TASK_STATUSES, type Task, type TaskPage, type TaskStatus } from "./task-types.js";

export interface GalleryViewOptions {
  api: Api;
  onUnauthorized(error: ApiError): void;
}

/**
 * The key's tasks, newest first, a page at a time, with a status filter:
 * a card per task with its first image (or latest partial image), status,
 * prompt and time; each opens the task.
 */
export function createGalleryView(options: GalleryViewOptions) {
  const heading = h("h2", { id: "gallery-heading", tabindex: "-1" }, "Gallery");
  const status = select("status", [
    ["", "All"],
    ...TASK_STATUSES.map((value) => [value, statusLabel({ status: value })] as const),
  ]);
  const refresh = h("button", { type: "button", class: "secondary" }, "Refresh");
  const grid = h("ul", { class: "gallery", "aria-labelledby": "gallery-heading" });
  const message = h("p", { class: "gallery-status", role: "status" });
  const newer = h("button", { type: "button", class: "secondary" }, "Newer");
  const older = h("button", { type: "button", class: "secondary" }, "Older");
  const pageLabel = h("span", { class: "page-number" });
  const element = h(
    "section",
    { class: "gallery-view panel", "aria-labelledby": "gallery-heading" },
    h("div", { class: "toolbar" }, heading, field("Status", status).wrapper, refresh),
    message,
    grid,
    h("nav", { class: "pager", "aria-label": "Gallery pages" }, newer, pageLabel, older),
  );

  let paging: Paging = firstPage();
  let shown: TaskPage | undefined;
  let loading: AbortController | undefined;
  const load = async () => {
    loading?.abort();
    const controller = (loading = new AbortController());
    message.textContent = "Loading…";
    newer.disabled = older.disabled = true;
    try {
      const page = await options.api.list(listQuery(paging), controller.signal);
      shown = page;
      replaceChildren(grid, ...page.data.map(card));
      message.textContent =
        page.data.length > 0
          ? `Page ${pageNumber(paging)}: ${page.data.length} task${page.data.length === 1 ? "" : "s"}.`
          : paging.status
            ? "No task with this status."
            : "No tasks yet: make one under New image.";
      pageLabel.textContent = `Page ${pageNumber(paging)}`;
      newer.disabled = pageNumber(paging) === 1;
      older.disabled = !page.has_more;
    } catch (err) {
      if (isAbort(err)) return;
      if (err instanceof ApiError && err.status === 401) return options.onUnauthorized(err);
      // A task the page started after expired meanwhile: start over.
      if (err instanceof ApiError && err.param === "after") {
        paging = firstPage(paging.status);
        return load();
      }
      message.textContent = err instanceof Error ? err.message : "The tasks could not be listed.";
    }
  };

  status.addEventListener("change", () => {
    paging = firstPage((status.value || undefined) as TaskStatus | undefined);
    void load();
  });
  refresh.addEventListener("click", () => void load());
  older.addEventListener("click", () => {
    if (!shown) return;
    paging = nextPage(paging, shown);
    void load();
  });
  newer.addEventListener("click", () => {
    paging = previousPage(paging);
    void load();
  });
  return { element, heading, show: load, dispose: () => loading?.abort() };
}

/** A task's card: a link to it, its picture, status, prompt and time. */
function card(task: Task): HTMLElement {
  const picture = task.data?.[0] ?? task.partial_images?.at(-1);
  const source = picture ? imageSource(picture) : undefined;
  const count = task.parameters?.n ?? task.data?.length ?? 1;
  return h(
    "li",
    {},
    h(
      "a",
      { class: "card", href: routeHash({ name: "task", id: task.id }) },
      source
        ? h("img", { src: source, alt: "", loading: "lazy", class: "thumb" })
        : h("span", { class: "thumb thumb-empty", "aria-hidden": "true" }),
      h("span", { class: `badge badge-${statusTone(task)}` }, statusLabel(task)),
      h("span", { class: "card-prompt" }, task.prompt ?? task.id),
      h(
        "span",
        { class: "card-meta" },
        `${formatTime(task.created)} · ${task.kind === "edit" ? "edit" : task.model}${count > 1 ? ` · ${count} images` : ""}`,
      ),
    ),
  );
}
