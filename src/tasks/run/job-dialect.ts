import type { Channel } from "../../channels/channel.js";
import type { KeyScrubber } from "../../channels/key-scrubber.js";
import type { AsyncDialect } from "../../config/schema/channel-schema.js";
import type { GeneratedImage } from "../core/generated-image.js";
import { TaskFailure } from "../core/task-failure.js";
import type { TaskRecord } from "../core/task-record.js";
import type { GenerationSource } from "./decode-generation.js";
import type { EditFile } from "./generate-images.js";
import { isObject } from "./json-object-of.js";

/** Where a channel's job stands, as one of its answers tells. */
export type JobState =
  /** Any status but the dialect's finished ones. */
  | { kind: "running" }
  | { kind: "completed"; images: GeneratedImage[]; usage?: unknown }
  | { kind: "failed"; failure: TaskFailure };

/** One call of a job's API: path after the channel's base URL, headers, body. */
export interface JobCall {
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
}

/** A job's answer (a submission's or a poll's, 2xx), read whole with its images taken out. */
export interface JobAnswer {
  status: number;
  /** The answer's JSON, each image string replaced by its marker (see `B64Extractor`). */
  body: Record<string, unknown>;
  /** Decodes its images: the channel, its key's scrubber, `n`, the signal, the images taken out. */
  source: GenerationSource;
}

/**
 * An async image API as a client speaks it: how a generation is submitted,
 * polled and cancelled, and how its answers read. One small file per
 * dialect (`sub2api-job.ts`, `bifrost-job.ts`, `openai-background-job.ts`).
 */
export interface JobDialect {
  readonly name: AsyncDialect;
  /** The key whose strings are base64 images in its answers (taken out as they stream). */
  readonly imageKey: string;
  /** The submission of `task` (an edit: with its `files`) to `channel`. */
  submission(task: TaskRecord, files: EditFile[] | undefined, channel: Channel): Promise<JobCall>;
  /** The poll of job `id` of `task`. */
  poll(id: string, task: TaskRecord): JobCall;
  /** The cancel of job `id`, where the dialect has one. */
  cancel?(id: string): JobCall;
  /** The job's id in the submission's answer; undefined when it names none. */
  idOf(body: Record<string, unknown>): string | undefined;
  /** The job's state in an answer (a submission may answer one finished already). */
  stateOf(answer: JobAnswer): Promise<JobState>;
}

/** A non-empty string, or undefined. */
export function text(value: unknown): string | undefined {
  return typeof value === "string" && value.length > 0 ? value : undefined;
}

/** A job id as a path segment: ids are the channel's, so never trusted to be URL-safe. */
export function segment(id: string): string {
  return encodeURIComponent(id);
}

/**
 * A failed job's error, as a task failure: `{code, message, type}`, also
 * nested one level (`{error: {...}}`, Bifrost's shape) or a plain string;
 * every field the channel's own text, so scrubbed of its key. `status` is
 * the HTTP status the job reports, for the message when it names none.
 */
export function jobFailure(
  error: unknown,
  status: unknown,
  scrubber: KeyScrubber,
  fallback = "The upstream channel's job failed",
): TaskFailure {
  const inner = isObject(error) && isObject(error.error) ? error.error : error;
  const fields = isObject(inner) ? inner : {};
  const message =
    text(fields.message) ??
    (typeof inner === "string" && inner ? inner : undefined) ??
    `${fallback}${typeof status === "number" ? ` (status ${status})` : ""}.`;
  const code = text(fields.code) ?? (status === 429 ? "rate_limit_exceeded" : "upstream_error");
  const type = text(fields.type) ?? "upstream_error";
  return new TaskFailure(
    scrubber.scrubString(code).slice(0, 100),
    scrubber.scrubString(message).slice(0, 2000),
    scrubber.scrubString(type).slice(0, 100),
  );
}
