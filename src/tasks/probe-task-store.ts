import { constants, existsSync } from "node:fs";
import { access } from "node:fs/promises";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import type { Logger } from "pino";
import type { Config } from "../config/config-schema.js";
import { closeRedisClient } from "../redis/open-redis-client.js";
import { openStoreRedis } from "./open-store-redis.js";

/**
 * Checks the task store `store.url` names without taking it: Redis answers
 * `PING` (within `store.connectTimeoutSec`); a SQLite file opens read-only
 * and reads (the service that holds it keeps its lock), or its folder can be
 * written when there is no file yet; memory always works. Resolves a short
 * description of what answered.
 * @throws Error whose message names `store.url` and the reason
 */
export async function probeTaskStore(config: Config, logger: Logger): Promise<string> {
  const store = config.deployment.taskStore;
  if (store.kind === "memory") return "memory:// (this process)";
  if (store.kind === "sqlite") {
    if (!existsSync(store.file)) {
      const folder = nearestFolder(store.file);
      await access(folder, constants.W_OK).catch((err: NodeJS.ErrnoException) => {
        throw new Error(`store.url: ${folder} cannot be written (${err.code ?? err.message})`);
      });
      return `sqlite://${store.file} (not made yet; its folder can be written)`;
    }
    try {
      const db = new Database(store.file, { readonly: true, fileMustExist: true });
      try {
        db.prepare("SELECT count(*) FROM sqlite_master").get();
      } finally {
        db.close();
      }
    } catch (err) {
      const { code, message } = err as { code?: string; message: string };
      throw new Error(`store.url: ${store.file} cannot be read as SQLite (${code ?? message})`);
    }
    return `sqlite://${store.file}`;
  }
  const { client, primary } = await openStoreRedis(config, store, logger);
  try {
    await client.ping();
    const { mode, primary: nodes } = primary.status();
    return `Redis (${mode}) answers PING; primary ${nodes.join(", ")}`;
  } finally {
    await closeRedisClient(client);
  }
}

/** The deepest folder of `file`'s path that exists (SQLite's folder is made at start-up). */
function nearestFolder(file: string): string {
  let folder = dirname(file);
  while (!existsSync(folder) && dirname(folder) !== folder) folder = dirname(folder);
  return folder;
}
