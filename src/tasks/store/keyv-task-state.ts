import type Keyv from "keyv";
import type { TaskStatus } from "../core/task-record.js";

/**
 * One task in its owner's index, in the order tasks were created, with its
 * status, so a list filtered by status reads only the records it returns.
 * (Entries written before the list existed have no status.) A finished
 * task's entry also names the expiry bucket it is listed in, so a delete
 * takes it out of there without a search.
 */
export type OwnerEntry = [id: string, created: number, status?: TaskStatus, bucket?: number];

/** What the memory store's steps share. */
export interface KeyvTaskState {
  keyv: Keyv;
  now: () => number;
  idempotencyTtlMs: number;
  /** The last step queued by {@link exclusive}, settled either way. */
  chain: Promise<unknown>;
}

/**
 * Runs `step` once every step queued before it has settled: with one process
 * writing, that is enough to make read-modify-write steps atomic.
 */
export function exclusive<T>(
  state: Pick<KeyvTaskState, "chain">,
  step: () => Promise<T>,
): Promise<T> {
  const result = state.chain.then(step);
  state.chain = result.catch(() => undefined);
  return result;
}

export const taskKey = (id: string) => `task:${id}`;
export const idemKey = (owner: string, key: string) => `idem:${owner}:${key}`;
/** Each owner's tasks, oldest first: its share of the store, and (later) its task list. */
export const ownerKey = (owner: string) => `owner:${owner}`;
export const UNFINISHED = "index:unfinished";
/** Finished tasks whose webhook event is not queued yet: `[id, sinceMs]`. */
export const OUTBOX = "index:webhook-outbox";

export async function read<T>(keyv: Keyv, key: string): Promise<T | undefined> {
  return (await keyv.get(key)) as T | undefined;
}

export async function readOwner(keyv: Keyv, owner: string): Promise<OwnerEntry[]> {
  return (await read<OwnerEntry[]>(keyv, ownerKey(owner))) ?? [];
}
