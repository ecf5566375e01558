import { createHash, randomBytes } from "node:crypto";
import { constants, promises as fs } from "node:fs";
import path from "node:path";
import { isValidTaskId } from "./task-id.js";
import { sniffImageType } from "../files/image-type.js";

/** One image saved on disk, as `check_image_task` reports it. */
export interface SavedImage {
  path: string;
  bytes: number;
  mime_type: string;
}

/** Where one image of a task comes from; called only when the image has to be written. */
export interface ImageSource {
  load(): Promise<{ bytes: Uint8Array; contentType?: string | undefined }>;
}

/** Saves a task's images into one directory and nowhere else. */
export interface ImageFileSink {
  /** The configured directory (created on first save). */
  readonly outputDir: string;
  /**
   * Saves image `i` of the task as `<taskId>-<i>.<ext>`. Files this sink saved before (per its
   * manifest) are returned as they are, without loading or writing anything.
   */
  saveTaskImages(taskId: string, sources: readonly ImageSource[]): Promise<SavedImage[]>;
  /** The images a previous call saved for the task, if all of them are still intact. */
  findSavedImages(taskId: string): Promise<SavedImage[] | undefined>;
}

/** Raised for everything the sink refuses to do; the message is meant for the tool result. */
export class ImageFileSinkError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ImageFileSinkError";
  }
}

interface ManifestEntry {
  name: string;
  bytes: number;
  sha256: string;
  mime_type: string;
}

const O_NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const MANIFEST_VERSION = 1;

/**
 * Creates the stdio server's file writer. The tool arguments come from a language model, so the
 * rules are strict: names are built only from validated task ids and sniffed image types; files
 * are created with O_EXCL under a temporary name and published with `link()`, which never
 * replaces anything (not a planted symlink, not a user's file, not a concurrent call's result);
 * an existing file is returned only if a hidden per-task manifest says this sink wrote it with
 * exactly these bytes, or if it already holds exactly the downloaded bytes.
 */
export function createImageFileSink(options: { outputDir: string }): ImageFileSink {
  const configuredDir = path.resolve(options.outputDir);
  let realDir: Promise<string> | undefined;

  function directory(): Promise<string> {
    realDir ??= (async () => {
      try {
        await fs.mkdir(configuredDir, { recursive: true });
        const real = await fs.realpath(configuredDir);
        if (!(await fs.stat(real)).isDirectory()) throw new Error("not a directory");
        return real;
      } catch (error) {
        realDir = undefined;
        throw new ImageFileSinkError(
          `Cannot use the output directory ${configuredDir} (${describe(error)}). ` +
            `Set IMAGE_OUTPUT_DIR to a writable directory.`,
        );
      }
    })();
    return realDir;
  }

  function entryPath(dir: string, name: string): string {
    const full = path.join(dir, name);
    // Belt and braces: names come from a validated task id, but never leave `dir` regardless.
    if (path.dirname(full) !== dir || path.basename(full) !== name) {
      throw new ImageFileSinkError(`Refused to write ${JSON.stringify(name)}.`);
    }
    return full;
  }

  function checkTaskId(taskId: string): void {
    if (!isValidTaskId(taskId)) {
      throw new ImageFileSinkError(
        `Refused task id ${JSON.stringify(taskId.slice(0, 80))}: ` +
          `a task id is "task_" followed by letters, digits, "_" or "-".`,
      );
    }
  }

  async function readManifest(dir: string, taskId: string): Promise<ManifestEntry[] | undefined> {
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
  async function checkEntry(dir: string, entry: ManifestEntry) {
    const bytes = await readRegularFile(entryPath(dir, entry.name));
    if (bytes === undefined) return "missing" as const;
    return bytes.byteLength === entry.bytes && sha256(bytes) === entry.sha256
      ? ("intact" as const)
      : ("changed" as const);
  }

  function toSaved(dir: string, entry: ManifestEntry): SavedImage {
    return { path: entryPath(dir, entry.name), bytes: entry.bytes, mime_type: entry.mime_type };
  }

  return {
    outputDir: configuredDir,

    async findSavedImages(taskId) {
      checkTaskId(taskId);
      const dir = await directory();
      const manifest = await readManifest(dir, taskId);
      if (!manifest || manifest.length === 0) return undefined;
      for (const entry of manifest) {
        if ((await checkEntry(dir, entry)) !== "intact") return undefined;
      }
      return manifest.map((entry) => toSaved(dir, entry));
    },

    async saveTaskImages(taskId, sources) {
      checkTaskId(taskId);
      const dir = await directory();
      const manifest = await readManifest(dir, taskId);
      const entries: ManifestEntry[] = [];
      for (const [index, source] of sources.entries()) {
        const recorded = manifest?.[index];
        if (recorded) {
          const state = await checkEntry(dir, recorded);
          if (state === "intact") {
            entries.push(recorded);
            continue;
          }
          if (state === "changed") {
            throw new ImageFileSinkError(
              `${entryPath(dir, recorded.name)} was changed after it was saved; it is left as it ` +
                `is. Move it away and call check_image_task again to save the image anew.`,
            );
          }
        }
        entries.push(await saveOne(dir, taskId, index, source));
      }
      if (!manifest) await writeManifest(dir, taskId, entries);
      return entries.map((entry) => toSaved(dir, entry));
    },
  };

  async function saveOne(
    dir: string,
    taskId: string,
    index: number,
    source: ImageSource,
  ): Promise<ManifestEntry> {
    const { bytes, contentType } = await source.load();
    const type = sniffImageType(bytes);
    if (!type) {
      throw new ImageFileSinkError(
        `Image ${index} of ${taskId} is not a PNG, JPEG or WebP image; nothing was saved.`,
      );
    }
    const declared = contentType?.split(";")[0]?.trim().toLowerCase();
    if (declared?.startsWith("image/") && declared !== type.mimeType && declared !== "image/jpg") {
      throw new ImageFileSinkError(
        `Image ${index} of ${taskId} was served as ${declared} but holds ${type.mimeType}; ` +
          `nothing was saved.`,
      );
    }
    const name = `${taskId}-${index}.${type.ext}`;
    const target = entryPath(dir, name);
    const entry: ManifestEntry = {
      name,
      bytes: bytes.byteLength,
      sha256: sha256(bytes),
      mime_type: type.mimeType,
    };
    const published = await publishExclusive(dir, target, bytes);
    if (!published) {
      // Something is already there: accept it only if it is a plain file with these very bytes
      // (an earlier or concurrent call of ours); never replace it.
      const existing = await readRegularFile(target).catch(() => undefined);
      if (!existing || existing.byteLength !== entry.bytes || sha256(existing) !== entry.sha256) {
        throw new ImageFileSinkError(
          `${target} already exists and was not written by this server (or is a link); ` +
            `it is left untouched. Move it away and call check_image_task again.`,
        );
      }
    }
    return entry;
  }

  /**
   * Records what was written, so a repeated call can trust these files without downloading.
   * Published like the images (never replacing anything): if something already sits at the
   * manifest's name, it stays, and the next call falls back to comparing downloaded bytes.
   */
  async function writeManifest(dir: string, taskId: string, files: ManifestEntry[]) {
    const body = JSON.stringify({ version: MANIFEST_VERSION, task_id: taskId, files }, null, 2);
    const target = entryPath(dir, manifestName(taskId));
    // The images are saved either way; without a manifest the next call compares bytes instead.
    await publishExclusive(dir, target, Buffer.from(body, "utf8")).catch(() => false);
  }
}

function manifestName(taskId: string): string {
  return `.${taskId}.manifest.json`;
}

/** Writes under a fresh temporary name, then links it into place; false if `target` exists. */
async function publishExclusive(dir: string, target: string, bytes: Uint8Array): Promise<boolean> {
  const temp = await writeTemp(dir, target, bytes);
  try {
    await fs.link(temp, target);
    return true;
  } catch (error) {
    if (errorCode(error) === "EEXIST") return false;
    throw new ImageFileSinkError(`Could not save ${target} (${describe(error)}).`);
  } finally {
    await fs.rm(temp, { force: true });
  }
}

async function writeTemp(dir: string, target: string, bytes: Uint8Array): Promise<string> {
  const temp = path.join(dir, `.${path.basename(target)}.${randomBytes(6).toString("hex")}.tmp`);
  let created = false;
  try {
    const handle = await fs.open(
      temp,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | O_NOFOLLOW,
      0o644,
    );
    created = true;
    try {
      await handle.writeFile(bytes);
      await handle.sync();
    } finally {
      await handle.close();
    }
    return temp;
  } catch (error) {
    if (created) await fs.rm(temp, { force: true }).catch(() => undefined);
    throw new ImageFileSinkError(`Could not write into ${dir} (${describe(error)}).`);
  }
}

/** The file's bytes if it is a regular file (not followed through a link), else undefined. */
async function readRegularFile(file: string): Promise<Uint8Array | undefined> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, constants.O_RDONLY | O_NOFOLLOW);
  } catch (error) {
    if (errorCode(error) === "ENOENT") return undefined;
    if (errorCode(error) === "ELOOP") throw linkError(file);
    throw new ImageFileSinkError(`Cannot read ${file} (${describe(error)}).`);
  }
  try {
    if (!(await handle.stat()).isFile()) throw linkError(file);
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

function linkError(file: string): ImageFileSinkError {
  return new ImageFileSinkError(
    `${file} is a link or not a regular file; it is left untouched and nothing was written there.`,
  );
}

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === "string" ? code : undefined;
}

function describe(error: unknown): string {
  return errorCode(error) ?? (error instanceof Error ? error.message : String(error));
}
