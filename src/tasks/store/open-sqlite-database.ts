import Database from "better-sqlite3";

/**
 * Opens `file` with better-sqlite3, whose native addon loads on the first
 * open: an addon that cannot load is reported as the installation problem
 * it is (see {@link sqliteDriverError}), not as a problem of the file.
 */
export function openSqliteDatabase(file: string, options: Database.Options): Database.Database {
  try {
    return new Database(file, options);
  } catch (err) {
    throw sqliteDriverError(err) ?? err;
  }
}

/** better-sqlite3's native addon did not load: an installation problem, not the file's. */
export class SqliteDriverError extends Error {
  override readonly name = "SqliteDriverError";
}

/**
 * The error to show when better-sqlite3's native addon did not load: built
 * for another Node version (the usual case after switching Node versions
 * without a rebuild) or never built. It says what to run, where Node's own
 * message names only module versions. Undefined for any other error.
 */
export function sqliteDriverError(
  err: unknown,
  nodeVersion = process.version,
): SqliteDriverError | undefined {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  const text = typeof message === "string" ? message : "";
  const notLoaded =
    code === "ERR_DLOPEN_FAILED" ||
    /NODE_MODULE_VERSION|Could not locate the bindings file|better_sqlite3\.node/.test(text);
  if (!notLoaded) return undefined;
  const versions = /NODE_MODULE_VERSION (\d+)[\s\S]*?NODE_MODULE_VERSION (\d+)/.exec(text);
  const why = versions
    ? `it was built for another Node version (NODE_MODULE_VERSION ${versions[1]}; Node ${nodeVersion} needs ${versions[2]})`
    : `its native addon did not load (${text.split("\n")[0] ?? ""})`;
  return new SqliteDriverError(
    `store.url: the SQLite driver (better-sqlite3) cannot load: ${why}. ` +
      "Run `npm rebuild better-sqlite3` (or `npm ci`) with this Node, " +
      "or set store.url to another store (redis://…, memory://).",
    { cause: err },
  );
}
