import type { IncomingMessage } from "node:http";
import { ServiceError } from "../../errors/service-error.js";
import { parseBody } from "../../errors/parse-body.js";
import { readJsonBody, type JsonBodyOptions } from "../../http/json-body.js";
import type { Submission } from "../service/submission.js";
import { submitTaskSchema } from "../service/task-schemas.js";
import {
  EDIT_FILE_FIELDS,
  MAX_EDIT_IMAGES,
  editFromForm,
  editFromJson,
} from "./edit-submission.js";
import { isMultipart, readMultipartForm, type MultipartForm } from "./read-multipart-form.js";

/** Text fields an edit form may have: the task's, with room for SDKs' extras to be refused by name. */
const MAX_FORM_FIELDS = 32;
/** One text field: a 32000-character prompt in any script fits. */
const MAX_FIELD_BYTES = 256 * 1024;

/** The body limits of the task routes. */
export interface TaskBodyLimits {
  /** A submission's JSON: a prompt and a few fields. */
  taskJson: JsonBodyOptions;
  /** An edit's JSON, its images as data: URLs, up to `server.maxUploadBytes`. */
  uploadJson: JsonBodyOptions;
  /** An edit's multipart body (`server.maxUploadBytes`). */
  maxUploadBytes: number;
  /** How long a body may take, in all and silent. */
  timing: { timeoutMs: number; idleMs: number };
}

/** How a route reads its body. */
export interface ReadOptions {
  /**
   * The body of the synchronous route (the dialects' submissions): its
   * `stream: false` is dropped, and `stream: true` refused, as a task is
   * polled for one final answer.
   */
  syncBody?: boolean;
}

/** A generation's JSON body, parsed. */
export async function readGeneration(
  req: IncomingMessage,
  limits: TaskBodyLimits,
  options: ReadOptions = {},
): Promise<Submission> {
  const value = (await readJsonBody(req, limits.taskJson))?.value;
  if (options.syncBody) dropStreamField(value);
  return { request: parseBody(submitTaskSchema, value) };
}

/** An edit, from a multipart form (`image`, `image[]`, `mask` files) or JSON (data: URLs). */
export async function readEdit(
  req: IncomingMessage,
  limits: TaskBodyLimits,
  options: ReadOptions = {},
): Promise<Submission> {
  if (!isMultipart(req)) {
    const value = (await readJsonBody(req, limits.uploadJson))?.value;
    if (options.syncBody) dropStreamField(value);
    return editFromJson(value);
  }
  const form = await readMultipartForm(req, {
    maxBytes: limits.maxUploadBytes,
    fileFields: EDIT_FILE_FIELDS,
    maxFiles: MAX_EDIT_IMAGES + 1,
    maxFields: MAX_FORM_FIELDS,
    maxFieldBytes: MAX_FIELD_BYTES,
    ...limits.timing,
  });
  return editFromForm(options.syncBody ? withoutStreamField(form) : form);
}

/** `stream` as a synchronous body sends it: JSON `false` / form `"false"` is fine, `true` is refused. */
function checkStream(value: unknown): void {
  if (value === false || value === "false" || value === null) return;
  const message =
    value === true || value === "true"
      ? "Streaming is not supported here: the task is polled for its result. Leave 'stream' out, or set it to false."
      : "Invalid 'stream': must be false here (the task is polled for its result).";
  throw new ServiceError("invalid_value", message, { param: "stream" });
}

/** Takes `stream` out of a JSON body (anything else is the schema's to judge). */
function dropStreamField(body: unknown): void {
  if (!body || typeof body !== "object" || Array.isArray(body)) return;
  const fields = body as Record<string, unknown>;
  if (!Object.hasOwn(fields, "stream")) return;
  checkStream(fields.stream);
  delete fields.stream;
}

/** A form without its `stream` field. */
function withoutStreamField(form: MultipartForm): MultipartForm {
  for (const field of form.fields) if (field.name === "stream") checkStream(field.value);
  return { ...form, fields: form.fields.filter((field) => field.name !== "stream") };
}
