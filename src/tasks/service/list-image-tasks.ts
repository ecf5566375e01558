import type { OwnedPage, OwnedQuery, TaskStore } from "../core/task-store.js";

/** Store pages read at most for one page of the list (each of `limit + 1` tasks). */
const MAX_READS = 8;

/**
 * A page of an owner's image tasks, in the query's order: the store's pages, with
 * the owner's background responses (tasks of another kind, in the same
 * index) left out, read on until the page is full. `undefined` when `after`
 * is not one of the owner's tasks.
 */
export async function listImageTasks(
  store: Pick<TaskStore, "listOwned">,
  owner: string,
  query: OwnedQuery,
): Promise<OwnedPage | undefined> {
  const records: OwnedPage["records"] = [];
  let after = query.after;
  for (let reads = 0; reads < MAX_READS; reads += 1) {
    const page = await store.listOwned(owner, { ...query, ...(after ? { after } : {}) });
    if (!page) return reads === 0 ? undefined : { records, hasMore: false };
    for (const record of page.records) {
      if (record.kind === "response") continue;
      if (records.length === query.limit) return { records, hasMore: true };
      records.push(record);
    }
    if (!page.hasMore) return { records, hasMore: false };
    after = page.records.at(-1)?.id;
  }
  // A key with very many responses and few image tasks: the page ends here, `has_more` says so.
  return { records, hasMore: true };
}
