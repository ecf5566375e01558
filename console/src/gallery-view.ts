import { ApiError, isAbort, type Api } from "./api.js";
import { confirmDialog } from "./confirm-dialog.js";
import { field, h, select } from "./dom.js";
import { statusLabel } from "./format.js";
import { createCard, type GalleryCard } from "./gallery-card.js";
import {
  firstPage,
  galleryTasks,
  listQuery,
  nextPage,
  pageNumber,
  previousPage,
  showsNewest,
  type Paging,
} from "./paging.js";
import { routeHash } from "./routes.js";
import { createThumbnailLoader } from "./thumbnail-loader.js";
import { isFinished, TASK_STATUSES, type TaskPage, type TaskStatus } from "./task-types.js";

export interface GalleryViewOptions {
  api: Api;
  onUnauthorized(error: ApiError): void;
}

/** How often the page's list is read again while one of its tasks runs. */
const POLL_MS = 2000;
/** How often the page new tasks land on is read again otherwise, to show tasks made elsewhere. */
const IDLE_POLL_MS = 10_000;

/**
 * The key's tasks, newest first (or oldest first), a page at a time, with a
 * status filter: a card per task; each opens the task. The page (its cursor),
 * the filter and the order are in the URL. While a task on the page runs, the page's list is
 * read again every 2 s and the cards follow (one request for the page, not
 * one connection per card). Cards can be selected and deleted together.
 */
export function createGalleryView(options: GalleryViewOptions): GalleryView {
  return new GalleryView(options);
}

/** The gallery page's controls and the places it writes to. */
function galleryLayout() {
  const heading = h("h2", { id: "gallery-heading", tabindex: "-1" }, "Gallery");
  const status = select("status", [
    ["", "All"],
    ...TASK_STATUSES.map((value) => [value, statusLabel({ status: value })] as const),
  ]);
  const order = select("order", [
    ["", "Newest first"],
    ["asc", "Oldest first"],
  ]);
  const refresh = h("button", { type: "button", class: "secondary" }, "Refresh");
  const remove = h("button", { type: "button", class: "danger" }, "Delete selected");
  const grid = h("ul", { class: "gallery", "aria-labelledby": "gallery-heading" });
  const message = h("p", { class: "gallery-status", role: "status" });
  const newer = h("button", { type: "button", class: "secondary" }, "Newer");
  const older = h("button", { type: "button", class: "secondary" }, "Older");
  const pageLabel = h("span", { class: "page-number" });
  const element = h(
    "section",
    { class: "gallery-view panel", "aria-labelledby": "gallery-heading" },
    h(
      "div",
      { class: "toolbar" },
      heading,
      field("Status", status).wrapper,
      field("Order", order).wrapper,
      refresh,
      remove,
    ),
    message,
    grid,
    h("nav", { class: "pager", "aria-label": "Gallery pages" }, newer, pageLabel, older),
  );
  return {
    ...{ element, heading, status, order, refresh, remove, grid, message },
    ...{ newer, older, pageLabel },
  };
}

/** The gallery page (see {@link createGalleryView}). */
class GalleryView {
  readonly element: HTMLElement;
  readonly heading: HTMLElement;
  private readonly ui: ReturnType<typeof galleryLayout>;
  private readonly thumbnails: ReturnType<typeof createThumbnailLoader>;
  private readonly cards = new Map<string, GalleryCard>();
  private paging: Paging = firstPage();
  private shown: TaskPage | undefined;
  private loading: AbortController | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** A line shown before the next page's own (what was deleted). */
  private notice = "";

  constructor(private readonly options: GalleryViewOptions) {
    this.ui = galleryLayout();
    this.element = this.ui.element;
    this.heading = this.ui.heading;
    this.thumbnails = createThumbnailLoader(options.api);
    this.listen();
  }

  /** Shows the page `to` (from the URL); `said`: a line to show first, e.g. what was deleted. */
  show(to: Paging, said?: string): Promise<void> {
    const samePage =
      routeHash({ name: "gallery", paging: to }) ===
      routeHash({ name: "gallery", paging: this.paging });
    if (!samePage) for (const card of this.cards.values()) card.checkbox.checked = false;
    this.paging = to;
    this.ui.status.value = to.status ?? "";
    this.ui.order.value = to.oldestFirst ? "asc" : "";
    // The way back is toward the first page: newer tasks, or older ones when oldest first.
    this.ui.newer.textContent = to.oldestFirst ? "Older" : "Newer";
    this.ui.older.textContent = to.oldestFirst ? "Newer" : "Older";
    if (said) this.notice = `${said} `;
    return this.load();
  }

  dispose(): void {
    this.stop();
    this.thumbnails.stop();
  }

  private listen(): void {
    const { grid, status, order, refresh, remove, older, newer } = this.ui;
    grid.addEventListener("change", () => this.updateRemove());
    const startOver = () =>
      this.navigate(
        firstPage((status.value || undefined) as TaskStatus | undefined, order.value === "asc"),
      );
    status.addEventListener("change", startOver);
    order.addEventListener("change", startOver);
    refresh.addEventListener("click", () => void this.load());
    remove.addEventListener("click", () => this.removeSelected());
    older.addEventListener("click", () => {
      if (this.shown && older.getAttribute("aria-disabled") !== "true") {
        this.navigate(nextPage(this.paging, this.shown));
      }
    });
    newer.addEventListener("click", () => {
      if (newer.getAttribute("aria-disabled") !== "true") this.navigate(previousPage(this.paging));
    });
  }

  private stop(): void {
    this.loading?.abort();
    clearTimeout(this.timer);
  }

  /** Reads the page; `quietly`: a poll, which says nothing unless something fails. */
  private async load(quietly = false): Promise<void> {
    this.stop();
    const controller = (this.loading = new AbortController());
    if (!quietly) this.ui.message.textContent = "Loading…";
    try {
      const page = await this.options.api.list(listQuery(this.paging), controller.signal);
      this.shown = page;
      this.render(page);
      if (!quietly) this.describe(page);
      if (galleryTasks(page).some((task) => !isFinished(task.status))) {
        this.timer = setTimeout(this.poll, POLL_MS);
      } else if (showsNewest(this.paging, page)) {
        this.timer = setTimeout(this.poll, IDLE_POLL_MS);
      }
    } catch (err) {
      if (isAbort(err)) return;
      if (err instanceof ApiError && err.status === 401) return this.options.onUnauthorized(err);
      // The task this page starts after is gone (expired, deleted): start over.
      if (err instanceof ApiError && err.param === "after") {
        this.paging = firstPage(this.paging.status, this.paging.oldestFirst);
        history.replaceState(null, "", routeHash({ name: "gallery", paging: this.paging }));
        return this.load();
      }
      this.ui.message.textContent =
        err instanceof Error ? err.message : "The tasks could not be listed.";
      if (quietly) this.timer = setTimeout(this.poll, POLL_MS * 2);
    }
  }

  private readonly poll = (): void => {
    // A tab in the background asks nothing; it catches up when shown.
    if (document.hidden) this.timer = setTimeout(this.poll, POLL_MS);
    else void this.load(true);
  };

  private describe(page: TaskPage): void {
    const { message, pageLabel, newer, older } = this.ui;
    const count = galleryTasks(page).length;
    const number = pageNumber(this.paging);
    message.textContent =
      this.notice +
      (count > 0
        ? `Page ${number}: ${count} task${count === 1 ? "" : "s"}.`
        : this.paging.status
          ? "No task with this status."
          : "No tasks yet: make one under New image.");
    this.notice = "";
    pageLabel.textContent = `Page ${number}`;
    setEnabled(newer, number > 1);
    setEnabled(older, page.has_more);
  }

  /** The page's cards, each made once and then updated in place. */
  private render(page: TaskPage): void {
    const { cards, thumbnails } = this;
    const { grid } = this.ui;
    const next = galleryTasks(page).map((task) => {
      const card = cards.get(task.id) ?? createCard(task);
      card.update(task);
      thumbnails.watch(card);
      return card;
    });
    for (const [id, card] of cards) if (!next.includes(card)) cards.delete(id);
    for (const card of next) cards.set(card.task().id, card);
    // Only new cards are inserted and gone ones removed: moving a node would drop its focus.
    const order = new Set(next.map((card) => card.element));
    for (const child of [...grid.children]) if (!order.has(child as HTMLLIElement)) child.remove();
    [...order].forEach((card, index) => {
      if (grid.children[index] !== card) grid.insertBefore(card, grid.children[index] ?? null);
    });
    this.updateRemove();
  }

  private selected(): GalleryCard[] {
    return [...this.cards.values()].filter((card) => card.checkbox.checked);
  }

  private updateRemove(): void {
    const count = this.selected().length;
    this.ui.remove.textContent = count > 0 ? `Delete selected (${count})` : "Delete selected";
  }

  private removeSelected(): void {
    const chosen = this.selected().map((card) => card.task().id);
    if (chosen.length === 0) {
      this.ui.message.textContent =
        "Select the tasks to delete first (the Select box on each card).";
      return;
    }
    void deleteTasks(this.options, chosen).then((said) => {
      if (said === undefined) return;
      this.notice = `${said} `;
      void this.load();
    });
  }

  private navigate(to: Paging): void {
    location.hash = routeHash({ name: "gallery", paging: to });
  }
}

/** Not `disabled`, which would drop the focus of the button just pressed to <body>. */
function setEnabled(button: HTMLButtonElement, enabled: boolean): void {
  if (enabled) button.removeAttribute("aria-disabled");
  else button.setAttribute("aria-disabled", "true");
}

/**
 * Deletes the tasks after asking; resolves with what to tell the user, or
 * undefined when they kept them. A task already gone counts as deleted.
 */
async function deleteTasks(
  options: GalleryViewOptions,
  ids: string[],
): Promise<string | undefined> {
  const many = ids.length === 1 ? "this task" : `these ${ids.length} tasks`;
  const sure = await confirmDialog({
    title: `Delete ${many}?`,
    message:
      "The tasks and their images are deleted at once, and their links stop working. " +
      "Tasks still running are cancelled first.",
    confirm: "Delete",
  });
  if (!sure) return undefined;
  let deleted = 0;
  const failures: string[] = [];
  for (const id of ids) {
    try {
      await options.api.remove(id);
      deleted += 1;
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) {
        options.onUnauthorized(err);
        return undefined;
      }
      if (err instanceof ApiError && err.code === "task_not_found") deleted += 1;
      else failures.push(err instanceof Error ? err.message : String(err));
    }
  }
  const done = deleted > 0 ? `Deleted ${deleted} task${deleted === 1 ? "" : "s"}. ` : "";
  return failures.length > 0 ? `${done}Not deleted: ${failures.join("; ")}` : done.trim();
}
