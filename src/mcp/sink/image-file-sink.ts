import { promises as fs } from "node:fs";
import path from "node:path";
import { sniffImageType } from "../../images/image-type.js";
import {
  describe,
  entryPath,
  publishExclusive,
  readRegularFile,
  sha256,
} from "./exclusive-files.js";
import { ImageFileSinkError } from "./image-file-sink-error.js";
import { checkEntry, readManifest, writeManifest, type ManifestEntry } from "./sink-manifest.js";
import { isTaskId } from "../../contract/task-contract.js";

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

/** The sink's directory: as configured, and its real path once made. */
interface SinkState {
  configuredDir: string;
  realDir: Promise<string> | undefined;
}

/**
 * Creates the stdio server's file writer. The tool arguments come from a language model, so the
 * rules are strict: names are built only from validated task ids and sniffed image types; files
 * are created with O_EXCL under a temporary name and published with `link()`, which never
 * replaces anything (not a planted symlink, not a user's file, not a concurrent call's result);
 * an existing file is returned only if a hidden per-task manifest (`sink-manifest.ts`) says this
 * sink wrote it with exactly these bytes, or if it already holds exactly the downloaded bytes.
 */
export function createImageFileSink(options: { outputDir: string }): ImageFileSink {
  const s: SinkState = { configuredDir: path.resolve(options.outputDir), realDir: undefined };
  return {
    outputDir: s.configuredDir,
    findSavedImages: (taskId) => findSavedImages(s, taskId),
    saveTaskImages: (taskId, sources) => saveTaskImages(s, taskId, sources),
  };
}

/** The directory's real path, made on first use; a failed try is tried again next time. */
function directory(s: SinkState): Promise<string> {
  s.realDir ??= (async () => {
    try {
      await fs.mkdir(s.configuredDir, { recursive: true });
      const real = await fs.realpath(s.configuredDir);
      if (!(await fs.stat(real)).isDirectory()) throw new Error("not a directory");
      return real;
    } catch (error) {
      s.realDir = undefined;
      throw new ImageFileSinkError(
        `Cannot use the output directory ${s.configuredDir} (${describe(error)}). ` +
          `Set IMAGE_OUTPUT_DIR to a writable directory.`,
      );
    }
  })();
  return s.realDir;
}

function checkTaskId(taskId: string): void {
  if (!isTaskId(taskId)) {
    throw new ImageFileSinkError(
      `Refused task id ${JSON.stringify(taskId.slice(0, 80))}: ` +
        `a task id is "task_" followed by letters, digits, "_" or "-".`,
    );
  }
}

function toSaved(dir: string, entry: ManifestEntry): SavedImage {
  return { path: entryPath(dir, entry.name), bytes: entry.bytes, mime_type: entry.mime_type };
}

/** {@link ImageFileSink.findSavedImages}. */
async function findSavedImages(s: SinkState, taskId: string): Promise<SavedImage[] | undefined> {
  checkTaskId(taskId);
  const dir = await directory(s);
  const manifest = await readManifest(dir, taskId);
  if (!manifest || manifest.length === 0) return undefined;
  for (const entry of manifest) {
    if ((await checkEntry(dir, entry)) !== "intact") return undefined;
  }
  return manifest.map((entry) => toSaved(dir, entry));
}

/** {@link ImageFileSink.saveTaskImages}. */
async function saveTaskImages(
  s: SinkState,
  taskId: string,
  sources: readonly ImageSource[],
): Promise<SavedImage[]> {
  checkTaskId(taskId);
  const dir = await directory(s);
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
}

/** Loads image `index`, checks its type, and publishes it under its name, never replacing. */
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
