import { decodeGenerationBody } from "./decode-generation.js";
import { encodeImageCall } from "./generate-images.js";
import { jobFailure, segment, text, type JobDialect } from "./job-dialect.js";

/**
 * Bifrost's async inference API for images, as a client: the synchronous
 * route's body submitted to `POST /async/images/generations` (edits:
 * `/async/images/edits`), answered `202 {id, status: "pending"}`; polled at
 * `GET /async/images/generations/{id}` (or `.../edits/{id}`), which answers
 * `202` while the job is pending or processing and `200` with its `result`
 * (the synchronous route's body) or its `error` once it ended.
 */
export const bifrostJob: JobDialect = {
  name: "bifrost",
  imageKey: "b64_json",

  async submission(task, files) {
    const { contentType, bytes } = await encodeImageCall(task.request, files);
    return {
      path: `/async/images/${files ? "edits" : "generations"}`,
      headers: { "content-type": contentType },
      body: bytes,
    };
  },

  poll: (id, task) => ({
    path: `/async/images/${task.kind === "edit" ? "edits" : "generations"}/${segment(id)}`,
  }),

  idOf: (body) => text(body.id) ?? text(body.job_id),

  async stateOf({ status, body, source }) {
    // 202: pending or processing, whatever the body says.
    if (status === 202) return { kind: "running" };
    if (body.status === "failed" || (body.error && !body.result)) {
      return {
        kind: "failed",
        failure: jobFailure(body.error, body.status_code, source.scrubber),
      };
    }
    if (body.status === "completed" || body.result) {
      return { kind: "completed", ...(await decodeGenerationBody(body.result, source)) };
    }
    return { kind: "running" };
  },
};
