import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import KeyvSqlite from "@keyv/sqlite";
import Keyv from "keyv";
import type { Logger } from "pino";
import type { Config } from "../../config/config-schema.js";
import type { TaskStore } from "../task-store.js";
import { createKeyvTaskStore } from "./keyv-task-store.js";

/**
 * Opens the store named by `store.url`: `memory://` or `sqlite://PATH`
 * (relative to the working directory; its folder is created).
 */
export async function createTaskStore(config: Config, logger: Logger): Promise<TaskStore> {
  const store = await openTaskStore(config, logger);
  // The first sweep of a new store marks where expiry buckets start.
  await store.sweepExpired();
  return store;
}

async function openTaskStore(config: Config, logger: Logger): Promise<TaskStore> {
  const url = config.store.url;
  // Idempotency keys must outlive the task they point at by the whole run.
  const idempotencyTtlMs = (config.imageTasks.retentionSec + config.imageTasks.timeoutSec) * 1000;
  if (url.startsWith("memory://")) {
    return createKeyvTaskStore(watch(new Keyv({ namespace: "its" }), logger), {
      persistent: false,
      idempotencyTtlMs,
    });
  }
  if (url.startsWith("sqlite://")) {
    const file = resolve(url.slice("sqlite://".length));
    mkdirSync(dirname(file), { recursive: true });
    const sqlite = new KeyvSqlite({ uri: `sqlite://${file}`, busyTimeout: 5000 });
    const keyv = watch(new Keyv({ store: sqlite, namespace: "its" }), logger);
    await keyv.get("meta:open"); // fail at start-up, not on the first request
    return createKeyvTaskStore(keyv, { persistent: true, idempotencyTtlMs });
  }
  throw new Error(`store.url: ${url.split(":")[0]}:// is not supported yet`);
}

/** Keyv reports backend trouble as events; an unheard one would crash the process. */
function watch(keyv: Keyv, logger: Logger): Keyv {
  keyv.on("error", (err: unknown) => logger.error({ err }, "task store error"));
  return keyv;
}
