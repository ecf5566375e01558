import type { IncomingMessage, ServerResponse } from "node:http";
import { parse as parseQuery } from "node:querystring";
import { pipeline } from "node:stream/promises";
import { isAnyTaskId } from "../../contract/task-contract.js";
import { ServiceError } from "../../errors/service-error.js";
import { clientGone } from "../../http/client-gone.js";
import type { Lane, LaneCall } from "../../http/lane.js";
import { createRouteTable } from "../../http/route-table.js";
import type { FileSource, ServedImage } from "../images/image-reads.js";
import type { ImageUrlSigner } from "../images/image-url-signer.js";

/** The one route of the lane: a task's image file, by signed link. */
const FILE_ROUTE = { method: "GET", template: "/v1/images/files/:taskId/:file" } as const;

/** `<index>.<ext>` or `partial-<index>.<ext>`. */
const FILE_NAME = /^(partial-)?(\d{1,2})\.([a-z]{3,4})$/;

/** Whether `If-None-Match` names the entity tag (or `*`), weak or strong. */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(",").some((tag) => ["*", etag, `W/${etag}`].includes(tag.trim()));
}

/** Dependencies of {@link createImageFilesLane}. */
export interface ImageFilesLaneDeps {
  images: FileSource;
  signer: ImageUrlSigner;
  now?: () => number;
}

/**
 * `GET /v1/images/files/{taskId}/{index}.{ext}` (and `partial-{index}.{ext}`,
 * a running task's partial images): the images of `url` tasks, without a
 * bearer header (the signature is the credential), until the task expires.
 * Streamed from the image store as it reads (no image is held in memory),
 * with its `Content-Type`, `Content-Length` and `ETag`; a matching
 * `If-None-Match` is answered 304. Every refusal is the same 404, so a URL
 * reveals nothing; an image store that is away is 503 `storage_unavailable`.
 */
export function createImageFilesLane(deps: ImageFilesLaneDeps): Lane {
  const table = createRouteTable([FILE_ROUTE]);
  return {
    match(method, path) {
      const hit = table(method, path);
      if (!hit) return undefined;
      const [taskId = "", file = ""] = hit.params;
      return {
        template: FILE_ROUTE.template,
        auth: false,
        serve: (call) => serveFile(deps, call, taskId, file),
      };
    },
  };
}

async function serveFile(
  deps: ImageFilesLaneDeps,
  { req, res, query }: LaneCall,
  taskId: string,
  file: string,
): Promise<void> {
  const notFound = new ServiceError(
    "not_found",
    "The image does not exist or its link has expired.",
  );
  const params = parseQuery(query);
  const expires = typeof params.expires === "string" ? params.expires : "";
  const signature = typeof params.signature === "string" ? params.signature : "";
  const match = FILE_NAME.exec(file);
  const nowSec = Math.floor((deps.now ?? Date.now)() / 1000);
  if (!match || !isAnyTaskId(taskId)) throw notFound;
  if (!deps.signer.verify(taskId, file, expires, signature, nowSec)) throw notFound;
  const signal = clientGone(res);
  const [, partial, index, ext] = match as unknown as [string, string | undefined, string, string];
  const image = partial
    ? await deps.images.openPartialFile(taskId, Number(index), ext, signal)
    : await deps.images.openCompleted(taskId, Number(index), ext, signal);
  if (!image) throw notFound;
  await sendImage(req, res, image, Math.min(Number(expires), image.expiresAt ?? Infinity), nowSec);
}

/** The image's headers and bytes (or 304, or the headers alone for `HEAD`). */
async function sendImage(
  req: IncomingMessage,
  res: ServerResponse,
  image: ServedImage,
  until: number,
  nowSec: number,
): Promise<void> {
  const headers = {
    ETag: image.etag,
    "Cache-Control": `private, max-age=${Math.max(0, until - nowSec)}`,
    // A browser keeps the image: one fetched by <img> (no Origin, no CORS header) must not be
    // reused for a page's fetch (Origin, CORS headers: see edge/cors.ts), nor the other way.
    Vary: "Origin",
  };
  const ifNoneMatch = req.headers["if-none-match"];
  if (matches(Array.isArray(ifNoneMatch) ? ifNoneMatch.join(",") : ifNoneMatch, image.etag)) {
    image.body.destroy();
    res.writeHead(304, headers).end();
    return;
  }
  res.writeHead(200, {
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
}
