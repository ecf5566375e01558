import { decodeGenerationBody } from "./decode-generation.js";
import { encodeImageCall } from "./generate-images.js";
import { jobFailure, segment, text, type JobDialect } from "./job-dialect.js";

/**
 * sub2api's async image API, as a client: the synchronous route's body
 * submitted to `POST /images/generations/async` (edits: the form to
 * `/images/edits/async`), answered `202 {id, task_id, status: "processing"}`;
 * polled at `GET /images/tasks/{id}` until `completed` (`result`: the
 * synchronous route's body) or `failed` (`error`, `http_status`).
 */
export const sub2apiJob: JobDialect = {
  name: "sub2api",
  imageKey: "b64_json",

  async submission(task, files) {
    const { contentType, bytes } = await encodeImageCall(task.request, files);
    return {
      path: files ? "/images/edits/async" : "/images/generations/async",
      headers: { "content-type": contentType },
      body: bytes,
    };
  },

  poll: (id) => ({ path: `/images/tasks/${segment(id)}` }),

  idOf: (body) => text(body.task_id) ?? text(body.id),

  async stateOf({ body, source }) {
    if (body.status === "completed") {
      return { kind: "completed", ...(await decodeGenerationBody(body.result, source)) };
    }
    if (body.status === "failed") {
      return { kind: "failed", failure: jobFailure(body.error, body.http_status, source.scrubber) };
    }
    return { kind: "running" };
  },
};
