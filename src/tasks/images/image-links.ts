import type { ImagesConfig } from "../../config/schema/images-schema.js";
import { extensionOf } from "../../images/image-type.js";
import type { TaskImage, TaskRecord } from "../core/task-record.js";
import { storage } from "../../errors/storage-unavailable.js";
import type { TaskImagesState } from "./task-images-deps.js";

/** SigV4's longest presigned link: 7 days. */
const PRESIGN_MAX_SEC = 7 * 24 * 3600;

const nowSec = (s: TaskImagesState) => Math.floor(s.now() / 1000);

/**
 * A link to `image` (file `file` of task `taskId` on the service's own
 * route), valid until `expiresAt`, as `mode` asks: public, presigned
 * (signed as of `signedFrom`, so every poll and replica gives the same
 * link; past SigV4's 7 days, a link signed this hour, for as long as
 * allowed), or the service's own signed URL.
 */
async function linkTo(
  s: TaskImagesState,
  taskId: string,
  image: TaskImage | undefined,
  file: { name: string | number; ext: string },
  times: { expiresAt: number; signedFrom: number },
  baseUrl: string,
  mode: ImagesConfig["links"],
): Promise<string> {
  const { imageStore, config } = s;
  const { expiresAt, signedFrom } = times;
  if (image && mode === "public" && config.publicBaseUrl) {
    return `${config.publicBaseUrl}/${imageStore.objectKey(image.key)}`;
  }
  if (image && mode === "presigned" && imageStore.presign) {
    const signedAt =
      expiresAt - signedFrom <= PRESIGN_MAX_SEC
        ? signedFrom
        : Math.max(signedFrom, Math.floor(nowSec(s) / 3600) * 3600);
    const key = image.key;
    return storage(() =>
      imageStore.presign!(key, {
        signingDate: new Date(signedAt * 1000),
        expiresInSec: Math.max(1, Math.min(PRESIGN_MAX_SEC, expiresAt - signedAt)),
      }),
    );
  }
  return `${baseUrl}${s.signer.path(taskId, file.name, file.ext, expiresAt)}`;
}

/**
 * The `url` of result image `index`, as `mode` asks (see `TaskImages.link`).
 */
export async function resultLink(
  s: TaskImagesState,
  record: TaskRecord,
  index: number,
  baseUrl: string,
  mode: ImagesConfig["links"],
): Promise<string> {
  const image = record.images?.[index];
  const ext = extensionOf(image?.mime ?? "image/png");
  const expiresAt = record.expires_at ?? 0;
  const signedFrom = record.completed_at ?? nowSec(s);
  return linkTo(
    s,
    record.id,
    image,
    { name: index, ext },
    { expiresAt, signedFrom },
    baseUrl,
    mode,
  );
}

/**
 * The latest a running task's partial images may be needed: when the task
 * would expire if it finished at its timeout (its links last that long).
 */
export function partialsUntil(s: TaskImagesState, record: TaskRecord): number {
  return record.expires_at ?? (record.started_at ?? nowSec(s)) + s.runLimitSec;
}

/** The `url` of partial image `index` of a task (file `partial-<index>.<ext>` on the service). */
export async function partialLink(
  s: TaskImagesState,
  record: TaskRecord,
  index: number,
  baseUrl: string,
  mode: ImagesConfig["links"],
): Promise<string> {
  const image = record.partials?.[index];
  const ext = extensionOf(image?.mime ?? "image/png");
  const times = { expiresAt: partialsUntil(s, record), signedFrom: record.started_at ?? nowSec(s) };
  return linkTo(s, record.id, image, { name: `partial-${index}`, ext }, times, baseUrl, mode);
}
