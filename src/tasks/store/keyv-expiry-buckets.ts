import type Keyv from "keyv";
import { imageKeysOf, type TaskRecord } from "../core/task-record.js";
import { ownerKey, read, readOwner, taskKey, type KeyvTaskState } from "./keyv-task-state.js";

/*
 * Keyv drops an expired entry only when it is read, so finished tasks, their
 * images and idempotency keys would stay on disk for ever. Each key with a
 * TTL is also listed in the bucket of the second it expires in; the sweep
 * deletes whole buckets once their second has passed: O(expired), no scan.
 * Second-long buckets keep a task's images no more than a second or two past
 * its expiry (the sweep runs every 2 s; see `task-maintenance.ts`).
 * A bucket also lists `owner-entry:<id>:<owner>` for each expiring task, so
 * the sweep takes the task out of its owner's index too.
 */
const BUCKET_MS = 1_000;
const SWEPT_UNTIL = "meta:swept-until";
const OWNER_ENTRY = "owner-entry:";
/** A bucket entry naming an image store key that expires with its task (handed on, not deleted here). */
const IMAGE_ENTRY = "image-key:";
const bucketKey = (bucket: number) => `expiring:${bucket}`;

/**
 * Lists `keys` in the bucket of the second after they expire; resolves the
 * bucket. Call inside `exclusive`.
 */
export async function expireLater(
  { keyv, now }: KeyvTaskState,
  keys: string[],
  ttlMs: number,
): Promise<number> {
  const bucket = Math.floor((now() + ttlMs) / BUCKET_MS) + 1;
  const listed = (await read<string[]>(keyv, bucketKey(bucket))) ?? [];
  // Appended in place: without a serializer the list read is the one held, and a copy
  // per finished task of a minute's list was most of the memory store's work.
  listed.push(...keys);
  await keyv.set(bucketKey(bucket), listed);
  return bucket;
}

/** What a finished task lists in its bucket: its record, its owner entry, its image keys. */
function taskEntries(record: TaskRecord): string[] {
  return [
    taskKey(record.id),
    `${OWNER_ENTRY}${record.id}:${record.owner}`,
    ...imageKeysOf(record).map((key) => `${IMAGE_ENTRY}${key}`),
  ];
}

/**
 * Lists a finished task, its owner entry and its image store keys
 * for the sweep, `ttlMs` from now; resolves the bucket. Call inside `exclusive`.
 */
export function expireWithTask(
  state: KeyvTaskState,
  record: TaskRecord,
  ttlMs: number,
): Promise<number> {
  return expireLater(state, taskEntries(record), ttlMs + BUCKET_MS);
}

/**
 * Takes a deleted task's entries out of `bucket` (where {@link expireWithTask}
 * listed them): the sweep then hands none of its image keys on. Call inside `exclusive`.
 */
export async function forgetExpiry(
  { keyv }: KeyvTaskState,
  record: TaskRecord,
  bucket: number,
): Promise<void> {
  const listed = await read<string[]>(keyv, bucketKey(bucket));
  if (!listed) return;
  const entries = new Set(taskEntries(record));
  const kept = listed.filter((key) => !entries.has(key));
  if (kept.length === listed.length) return;
  if (kept.length > 0) await keyv.set(bucketKey(bucket), kept);
  else await keyv.delete(bucketKey(bucket));
}

/** Takes expired tasks out of their owners' indexes; an empty index is deleted. */
async function dropFromOwners(keyv: Keyv, entries: string[]): Promise<void> {
  const byOwner = new Map<string, Set<string>>();
  for (const entry of entries) {
    const rest = entry.slice(OWNER_ENTRY.length);
    const colon = rest.indexOf(":");
    const owner = rest.slice(colon + 1);
    byOwner.set(owner, (byOwner.get(owner) ?? new Set()).add(rest.slice(0, colon)));
  }
  for (const [owner, ids] of byOwner) {
    const kept = (await readOwner(keyv, owner)).filter(([id]) => !ids.has(id));
    if (kept.length > 0) await keyv.set(ownerKey(owner), kept);
    else await keyv.delete(ownerKey(owner));
  }
}

/** Deletes one bucket's keys; resolves how many task or store keys it listed. */
async function sweepBucket(
  keyv: Keyv,
  bucket: number,
  dropImages: ((keys: string[]) => Promise<void>) | undefined,
): Promise<number> {
  const listed = await read<string[]>(keyv, bucketKey(bucket));
  let deleted = 0;
  if (listed?.length) {
    const keys = listed.filter(
      (key) => !key.startsWith(OWNER_ENTRY) && !key.startsWith(IMAGE_ENTRY),
    );
    const images = listed.filter((key) => key.startsWith(IMAGE_ENTRY));
    if (images.length > 0) {
      await dropImages?.(images.map((key) => key.slice(IMAGE_ENTRY.length)));
    }
    await Promise.all(keys.map((key) => keyv.delete(key)));
    await dropFromOwners(
      keyv,
      listed.filter((key) => key.startsWith(OWNER_ENTRY)),
    );
    deleted = keys.length;
  }
  await keyv.delete(bucketKey(bucket));
  return deleted;
}

/** `sweepExpired`'s body: the buckets whose second has passed. Call inside `exclusive`. */
export async function sweepBuckets(
  { keyv, now }: KeyvTaskState,
  dropImages: ((keys: string[]) => Promise<void>) | undefined,
): Promise<number> {
  const current = Math.floor(now() / BUCKET_MS);
  let from = await read<number>(keyv, SWEPT_UNTIL);
  if (from === undefined) {
    // A new store: nothing can be listed in a bucket before this one.
    await keyv.set(SWEPT_UNTIL, current);
    return 0;
  }
  let deleted = 0;
  // Bounded per call, so a store left alone for months catches up in steps.
  for (let bucket = from; bucket <= current && bucket < from + 10_000; bucket += 1) {
    deleted += await sweepBucket(keyv, bucket, dropImages);
  }
  from = Math.min(current + 1, from + 10_000);
  await keyv.set(SWEPT_UNTIL, from);
  return deleted;
}
