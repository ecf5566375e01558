import { Router } from "express";
import { AppError } from "../http/app-error.js";
import { TASK_ID_PATTERN } from "../tasks/task-record.js";
import type { ImageTasks } from "../tasks/create-image-tasks.js";
import { extensionOf } from "./image-type.js";
import type { ImageUrlSigner } from "./image-url-signer.js";

/**
 * `GET /v1/images/files/{taskId}/{index}.{ext}`: the images of `url` tasks,
 * without a bearer header (the signature is the credential), until the task
 * expires. Every refusal is the same 404, so a URL reveals nothing.
 */
export function createFilesRouter(deps: {
  images: ImageTasks["images"];
  signer: ImageUrlSigner;
  now?: () => number;
}): Router {
  const router = Router();
  const now = deps.now ?? Date.now;
  router.get("/v1/images/files/:taskId/:file", async (req, res) => {
    const { taskId, file } = req.params;
    const notFound = new AppError("not_found", "The image does not exist or its link has expired.");
    const expires = typeof req.query.expires === "string" ? req.query.expires : "";
    const signature = typeof req.query.signature === "string" ? req.query.signature : "";
    const match = /^(\d{1,2})\.([a-z]{3,4})$/.exec(file);
    const nowSec = Math.floor(now() / 1000);
    if (!match || !TASK_ID_PATTERN.test(taskId)) throw notFound;
    if (!deps.signer.verify(taskId, file, expires, signature, nowSec)) throw notFound;
    const index = Number(match[1]);
    const image = await deps.images.read(taskId, index);
    if (!image || extensionOf(image.mime) !== match[2]) throw notFound;
    const { bytes } = image;
    res
      .status(200)
      .set({
        "Content-Type": image.mime,
        "Content-Length": String(bytes.length),
        "Cache-Control": `private, max-age=${Math.max(0, Number(expires) - nowSec)}`,
        "X-Content-Type-Options": "nosniff",
      })
      .end(bytes);
  });
  return router;
}
