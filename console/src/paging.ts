import type { ListQuery } from "./api.js";
import type { Task, TaskPage, TaskStatus } from "./task-types.js";

/**
 * Where the gallery is in the key's task list. The API pages forward only
 * (`after`: the last id of the page before), so the way back is the stack of
 * the cursors that led here.
 */
export interface Paging {
  status?: TaskStatus;
  /** The list runs oldest first (else newest first). */
  oldestFirst?: true;
  /** The `after` of each page before this one; the first page's is undefined. */
  previous: ReadonlyArray<string | undefined>;
  /** This page's `after`; undefined on the first page. */
  after?: string;
}

export const PAGE_SIZE = 24;

/** The first page, with a status filter or none, newest first unless `oldestFirst`. */
export function firstPage(status?: TaskStatus, oldestFirst = false): Paging {
  return { ...(status ? { status } : {}), ...(oldestFirst ? { oldestFirst } : {}), previous: [] };
}

/** The page after `page`, which was answered with `answer`; `page` when there is none. */
export function nextPage(page: Paging, answer: Pick<TaskPage, "has_more" | "last_id">): Paging {
  if (!answer.has_more || !answer.last_id) return page;
  return { ...page, previous: [...page.previous, page.after], after: answer.last_id };
}

/** The page before `page`; `page` itself on the first page. */
export function previousPage(page: Paging): Paging {
  if (page.previous.length === 0) return page;
  const after = page.previous.at(-1);
  const back: Paging = { ...page, previous: page.previous.slice(0, -1) };
  if (after === undefined) delete back.after;
  else back.after = after;
  return back;
}

/** The page's number, from 1. */
export function pageNumber(page: Paging): number {
  return page.previous.length + 1;
}

/**
 * Whether `page`, answered with `answer`, is where a task made now would show: the first page
 * newest first, the last one oldest first.
 */
export function showsNewest(page: Paging, answer: Pick<TaskPage, "has_more">): boolean {
  return page.oldestFirst ? !answer.has_more : page.previous.length === 0;
}

/** The list request for `page`. */
export function listQuery(page: Paging, limit = PAGE_SIZE): ListQuery {
  return {
    limit,
    ...(page.after ? { after: page.after } : {}),
    ...(page.status ? { status: page.status } : {}),
    ...(page.oldestFirst ? { order: "asc" as const } : {}),
  };
}

/**
 * The tasks of a page the gallery shows: the service's own (`image.task`).
 * A key's list also holds the tasks it made in another dialect, each in that
 * dialect's shape (sub2api's `image.generation.task`: no `created`, no
 * `model`), which the gallery's cards cannot show.
 */
export function galleryTasks(page: Pick<TaskPage, "data">): Task[] {
  return page.data.filter((task: { object?: unknown }) => task.object === "image.task");
}
