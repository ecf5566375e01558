import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { extname, join, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

/** The types of the files the console is made of; any other file in the folder is not served. */
const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
};

/** One file of the console, read once, with its gzip form. */
export interface ConsoleAsset {
  contentType: string;
  body: Buffer;
  /** Strong entity tags of the plain and the gzip form. */
  etag: string;
  gzipEtag: string;
  /** Undefined when gzip would not make it smaller. */
  gzip?: Buffer;
}

/** The console's files by their path below `/console/` (`index.html`, `js/console/src/main.js`, ...). */
export type ConsoleAssets = ReadonlyMap<string, ConsoleAsset>;

/**
 * Where `npm run build` puts the console (`dist/console-ui/`), found from
 * this module's own place: two levels below the package root both as
 * `src/console/*.ts` and as `dist/console/*.js`.
 */
export function defaultConsoleAssetsDir(): string {
  return fileURLToPath(new URL("../../dist/console-ui/", import.meta.url));
}

/**
 * Reads the console's files into memory (they are a few dozen KiB). Only the
 * files found here are ever served, by exact path: a request cannot name
 * anything else, `..` and encodings included.
 */
export async function loadConsoleAssets(dir: string): Promise<ConsoleAssets> {
  const assets = new Map<string, ConsoleAsset>();
  const names = await readdir(dir, { recursive: true });
  for (const name of names.sort()) {
    const contentType = CONTENT_TYPES[extname(name)];
    if (!contentType) continue;
    const body = await readFile(join(dir, name)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "EISDIR") return undefined;
      throw err;
    });
    if (!body) continue;
    const gzip = gzipSync(body, { level: 9 });
    const hash = createHash("sha256").update(body).digest("base64url").slice(0, 27);
    assets.set(name.split(sep).join("/"), {
      contentType,
      body,
      etag: `"${hash}"`,
      gzipEtag: `"${hash}-gz"`,
      ...(gzip.length < body.length ? { gzip } : {}),
    });
  }
  if (!assets.has("index.html")) throw new Error(`no index.html in ${dir}`);
  return assets;
}
