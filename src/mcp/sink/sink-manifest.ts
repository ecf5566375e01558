import { entryPath, publishExclusive, readRegularFile, sha256 } from "./exclusive-files.js";

/** One image as the manifest records it. */
export interface ManifestEntry {
  name: string;
  bytes: number;
  sha256: string;
  mime_type: string;
}

const MANIFEST_VERSION = 1;

function manifestName(taskId: string): string {
  return `.${taskId}.manifest.json`;
}

/** The task's hidden manifest in `dir`, if there is a valid one. */
export async function readManifest(
  dir: string,
  taskId: string,
): Promise<ManifestEntry[] | undefined> {
  const bytes = await readRegularFile(entryPath(dir, manifestName(taskId)));
  if (bytes === undefined) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(bytes).toString("utf8")) as {
      version?: unknown;
      task_id?: unknown;
      files?: unknown;
    };
    if (parsed.version !== MANIFEST_VERSION || parsed.task_id !== taskId) return undefined;
    if (!Array.isArray(parsed.files)) return undefined;
    const files = parsed.files as ManifestEntry[];
    const valid = files.every(
      (file, i) =>
        typeof file.name === "string" &&
        file.name.startsWith(`${taskId}-${i}.`) &&
        /^[a-z]+$/.test(file.name.slice(`${taskId}-${i}.`.length)) &&
        typeof file.bytes === "number" &&
        typeof file.sha256 === "string" &&
        typeof file.mime_type === "string",
    );
    return valid ? files : undefined;
  } catch {
    return undefined;
  }
}

/** "intact" if the file holds what the manifest recorded, "missing" if it is gone. */
export async function checkEntry(dir: string, entry: ManifestEntry) {
  const bytes = await readRegularFile(entryPath(dir, entry.name));
  if (bytes === undefined) return "missing" as const;
  return bytes.byteLength === entry.bytes && sha256(bytes) === entry.sha256
    ? ("intact" as const)
    : ("changed" as const);
}

/**
 * Records what was written, so a repeated call can trust these files without downloading.
 * Published like the images (never replacing anything): if something already sits at the
 * manifest's name, it stays, and the next call falls back to comparing downloaded bytes.
 */
export async function writeManifest(
  dir: string,
  taskId: string,
  files: ManifestEntry[],
): Promise<void> {
  const body = JSON.stringify({ version: MANIFEST_VERSION, task_id: taskId, files }, null, 2);
  const target = entryPath(dir, manifestName(taskId));
  // The images are saved either way; without a manifest the next call compares bytes instead.
  await publishExclusive(dir, target, Buffer.from(body, "utf8")).catch(() => false);
}
