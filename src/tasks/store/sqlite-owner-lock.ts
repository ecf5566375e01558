import { readFile, rm, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { ConfigError } from "../../config/config-error.js";
import { OWNER_FILE_MODE } from "../../fs/owner-only.js";

/** What {@link lockSqliteStore} needs of the SQLite connection: run one statement. */
export interface SqliteQuery {
  query(sql: string): Promise<unknown>;
}

/** Who holds a SQLite store, written beside it for the next process's message. */
interface Holder {
  pid: number;
  host: string;
  since: string;
}

/**
 * A SQLite store that another process holds. A {@link ConfigError}, so the
 * CLI prints its one line and exits 2, as for any store it cannot use.
 */
export class StoreLockedError extends ConfigError {
  constructor(line: string) {
    super([line]);
    this.name = "StoreLockedError";
  }
}

/**
 * Makes the SQLite file this process's own: the connection switches to
 * `locking_mode=EXCLUSIVE` and takes the file's exclusive lock, which SQLite
 * then keeps until the connection closes (an OS file lock, so the kernel
 * drops it when the process dies, even by SIGKILL). A second process fails
 * to take it and is refused with a line naming the file and the holder
 * (pid, host and start time, kept in `<file>.owner`). Resolves a function
 * that removes that note; closing the connection releases the lock.
 */
export async function lockSqliteStore(db: SqliteQuery, file: string): Promise<() => Promise<void>> {
  const ownerFile = `${file}.owner`;
  try {
    await db.query("PRAGMA locking_mode = EXCLUSIVE");
    await db.query("BEGIN EXCLUSIVE");
    await db.query("COMMIT");
  } catch (err) {
    if (!/SQLITE_BUSY|SQLITE_LOCKED|database is locked/i.test(String((err as Error).message))) {
      throw err;
    }
    const holder = await readHolder(ownerFile);
    throw new StoreLockedError(
      `store.url: sqlite://${file} is in use by ${holder}; a SQLite store belongs to one process ` +
        "(stop that one, give this one another file, or use redis:// for several replicas)",
    );
  }
  const me: Holder = { pid: process.pid, host: hostname(), since: new Date().toISOString() };
  await writeFile(ownerFile, `${JSON.stringify(me)}\n`, { mode: OWNER_FILE_MODE });
  return async () => {
    const current = await readFile(ownerFile, "utf8").catch(() => "");
    if (current.includes(`"pid":${me.pid},`)) await rm(ownerFile, { force: true });
  };
}

async function readHolder(ownerFile: string): Promise<string> {
  try {
    const holder = JSON.parse(await readFile(ownerFile, "utf8")) as Holder;
    return `process ${holder.pid} on ${holder.host} (since ${holder.since})`;
  } catch {
    return "another process";
  }
}
