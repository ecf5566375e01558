import { pipeline } from "node:stream/promises";
import { Router } from "express";
import { ServiceError } from "../errors/service-error.js";
import type { ImageObject } from "../images/image-store.js";
import { clientGone } from "../http/client-gone.js";
import { TASK_ID_PATTERN } from "../tasks/core/task-record.js";
import type { ImageUrlSigner } from "./image-url-signer.js";

/** An image the files route serves, and when its task expires (links die with it). */
export type ServedImage = ImageObject & {
  /** Unix seconds: the link is refused from then on, and no cache keeps it longer. */
  expiresAt?: number;
};

/** What the files route reads: a completed task's image by id, as a stream. */
export interface FileSource {
  /**
   * Image `index` of the completed task `taskId`, if its type has extension
   * `ext`; undefined otherwise. Rejects with 503 when a store is away.
   */
  openCompleted(
    taskId: string,
    index: number,
    ext: string,
    signal?: AbortSignal,
  ): Promise<ServedImage | undefined>;
  /** Partial image `index` of task `taskId` (while the task is kept), if its extension is `ext`. */
  openPartialFile(
    taskId: string,
    index: number,
    ext: string,
    signal?: AbortSignal,
  ): Promise<ServedImage | undefined>;
}

/** Whether `If-None-Match` names the entity tag (or `*`), weak or strong. */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(",").some((tag) => ["*", etag, `W/${etag}`].includes(tag.trim()));
}

/**
 * `GET /v1/images/files/{taskId}/{index}.{ext}` (and `partial-{index}.{ext}`,
 * a running task's partial images): the images of `url` tasks,
 * without a bearer header (the signature is the credential), until the task
 * expires. Streamed from the image store as it reads (no image is held in
 * memory), with its `Content-Type`, `Content-Length` and `ETag`; a matching
 * `If-None-Match` is answered 304. Every refusal is the same 404, so a URL
 * reveals nothing; an image store that is away is 503 `storage_unavailable`.
 */
export function createFilesRouter(deps: {
  images: FileSource;
  signer: ImageUrlSigner;
  now?: () => number;
}): Router {
  const router = Router();
  const now = deps.now ?? Date.now;
  router.get("/v1/images/files/:taskId/:file", async (req, res) => {
    const { taskId, file } = req.params;
    const notFound = new ServiceError(
      "not_found",
      "The image does not exist or its link has expired.",
    );
    const expires = typeof req.query.expires === "string" ? req.query.expires : "";
    const signature = typeof req.query.signature === "string" ? req.query.signature : "";
    const match = /^(partial-)?(\d{1,2})\.([a-z]{3,4})$/.exec(file);
    const nowSec = Math.floor(now() / 1000);
    if (!match || !TASK_ID_PATTERN.test(taskId)) throw notFound;
    if (!deps.signer.verify(taskId, file, expires, signature, nowSec)) throw notFound;
    const signal = clientGone(res);
    const [, partial, index, ext] = match as unknown as [
      string,
      string | undefined,
      string,
      string,
    ];
    const image = partial
      ? await deps.images.openPartialFile(taskId, Number(index), ext, signal)
      : await deps.images.openCompleted(taskId, Number(index), ext, signal);
    if (!image) throw notFound;
    const until = Math.min(Number(expires), image.expiresAt ?? Infinity);
    const headers = {
      ETag: image.etag,
      "Cache-Control": `private, max-age=${Math.max(0, until - nowSec)}`,
      "X-Content-Type-Options": "nosniff",
    };
    if (matches(req.get("if-none-match"), image.etag)) {
      image.body.destroy();
      res.status(304).set(headers).end();
      return;
    }
    res.status(200).set({
      ...headers,
      "Content-Type": image.contentType,
      "Content-Length": String(image.size),
    });
    if (req.method === "HEAD") {
      image.body.destroy();
      res.end();
      return;
    }
    // Headers are out once bytes flow: a store that fails now, or a client that leaves, ends
    // with the connection cut (a short body against Content-Length), nothing more to answer.
    await pipeline(image.body, res).catch(() => res.destroy());
  });
  return router;
}
