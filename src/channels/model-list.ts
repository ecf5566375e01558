/** The `created` of a listed model that gives none (a fixed date: lists stay stable). */
export const LISTED_AT = Math.floor(Date.UTC(2024, 0, 1) / 1000);
/** The largest model list read from a channel or gateway. */
export const MAX_MODEL_LIST_BYTES = 4 * 1024 * 1024;

/** One entry of an OpenAI model list. */
export interface ModelInfo {
  id: string;
  object: "model";
  created: number;
  owned_by: string;
}

/** A model list: sorted by id, no duplicates. */
export interface ModelList {
  readonly ids: ReadonlySet<string>;
  readonly list: readonly ModelInfo[];
}

/**
 * An OpenAI model list (`{data: [{id, created?, owned_by?}]}`) as
 * {@link ModelList}: sorted by id, first of each id kept, entries without
 * a string id skipped. `undefined` when the body is not such a list.
 */
export function parseModelList(body: Buffer, channelName: string): ModelList | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
  const data = (parsed as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return undefined;
  const byId = new Map<string, ModelInfo>();
  for (const item of data as unknown[]) {
    if (typeof item !== "object" || item === null) continue;
    const { id, created, owned_by: ownedBy } = item as Record<string, unknown>;
    if (typeof id !== "string" || id === "" || byId.has(id)) continue;
    byId.set(id, {
      id,
      object: "model",
      created: typeof created === "number" && Number.isFinite(created) ? created : LISTED_AT,
      owned_by: typeof ownedBy === "string" ? ownedBy : channelName,
    });
  }
  const list = [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { ids: new Set(byId.keys()), list };
}
