// The memory phase's setups: a task store and an image store per setup, under names of the
// run's own, and the service started on them without allocator tuning.
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import Database from "better-sqlite3";
import { JSON_HEADERS, serviceConfig, startService } from "./processes.mjs";
import { prefixMemory, REDIS_URL } from "./redis-keys.mjs";
import { taskBody } from "./payloads.mjs";

export const SETUPS = [
  { key: "sqlite-file", label: "SQLite, file images", store: "sqlite", images: "file" },
  { key: "redis-tmpfs", label: "Redis, images on tmpfs", store: "redis", images: "tmpfs" },
  { key: "redis-memory", label: "Redis, memory images", store: "redis", images: "memory" },
  { key: "redis-file", label: "Redis, file images", store: "redis", images: "file" },
  { key: "redis-s3", label: "Redis, S3 images (s3rver)", store: "redis", images: "s3" },
];
/** The baseline of the image stores' cost on the Redis path. */
export const TMPFS_SETUP = "redis-tmpfs";
/** What is held for the RSS figures: every setup with a real image store. */
export const HOLD = ["sqlite-file", "redis-file", "redis-s3"];

/** Memory-backed, where there is one (Linux): the tmpfs setup is skipped elsewhere. */
export const TMPFS = "/dev/shm";

/** Bytes of the files under `dir`, and how many. */
export async function treeSize(dir) {
  let bytes = 0;
  let files = 0;
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    // A file the sweep deletes while it is counted is not there any more.
    const info = await stat(join(entry.parentPath ?? entry.path, entry.name)).catch(
      () => undefined,
    );
    if (!info) continue;
    files += 1;
    bytes += info.size;
  }
  return { bytes, files };
}

/** A setup's store and image store, under names of its own (`tag`: throughput or hold). */
export function place(ctx, setup, tag, s3) {
  const dir =
    setup.images === "tmpfs"
      ? join(TMPFS, `${ctx.runId}-${setup.key}-${tag}`)
      : join(ctx.tempDir, `${setup.key}-${tag}`);
  const prefix = setup.store === "redis" ? ctx.redisPrefix(`${setup.key}-${tag}`) : undefined;
  const storeUrl = setup.store === "redis" ? REDIS_URL : `sqlite://${join(dir, "tasks.db")}`;
  const images =
    setup.images === "memory"
      ? { url: "memory://" }
      : setup.images === "file" || setup.images === "tmpfs"
        ? { url: `file://${join(dir, "images")}` }
        : {
            url: `s3://${s3.bucket}/${ctx.runId}-${setup.key}-${tag}`,
            s3: {
              endpoint: s3.url,
              forcePathStyle: true,
              accessKeyId: s3.accessKeyId,
              secretAccessKey: s3.secretAccessKey,
            },
          };
  return { dir, prefix, storeUrl, images };
}

/**
 * The service's environment here: no allocator tuning (MALLOC_* and GLIBC_TUNABLES removed),
 * unless BENCH_MALLOC_MMAP_THRESHOLD sets one (131072 is the Docker image's).
 */
export function allocatorEnv(env = process.env) {
  const removed = Object.fromEntries(
    Object.keys(env)
      .filter((name) => name.startsWith("MALLOC_") || name === "GLIBC_TUNABLES")
      .map((name) => [name, undefined]),
  );
  const threshold = env.BENCH_MALLOC_MMAP_THRESHOLD;
  return threshold ? { ...removed, MALLOC_MMAP_THRESHOLD_: threshold } : removed;
}

/** Starts the service on a setup's stores (see {@link place}). */
export function startOn(ctx, channel, where, { label, role = "service", ...imageTasks }) {
  const config = serviceConfig({
    channelUrl: channel.url,
    storeUrl: where.storeUrl,
    prefix: where.prefix,
    imageTasks: { maxConcurrent: 16, ...imageTasks },
  });
  return startService(
    ctx,
    { ...config, images: where.images },
    { role, label, processEnv: allocatorEnv() },
  );
}

/** A load job submitting url (or b64) tasks, `Prefer: wait=N` with `wait`. */
export const submitJob = (service, format, wait) => ({
  origins: [service.url],
  requests: [
    {
      path: "/v1/images/tasks",
      method: "POST",
      headers: wait ? { ...JSON_HEADERS, prefer: `wait=${wait}` } : JSON_HEADERS,
      body: taskBody("gpt-image-1", format),
    },
  ],
  concurrency: 32,
  collectIds: true,
});

/**
 * The task store's size: Redis, MEMORY USAGE over the prefix; SQLite (its service stopped), the
 * pages in use, tables and indexes (the file itself grows in steps).
 */
export async function storeBytes(where) {
  if (where.prefix) return (await prefixMemory(where.prefix)).bytes;
  const db = new Database(where.storeUrl.slice("sqlite://".length), {
    readonly: true,
    fileMustExist: true,
  });
  try {
    const pragma = (name) => db.pragma(name, { simple: true });
    return (pragma("page_count") - pragma("freelist_count")) * pragma("page_size");
  } finally {
    db.close();
  }
}
