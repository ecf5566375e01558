import { drawRandom, randomPool } from "../../ids/random-pool.js";
import type { TaskError, TaskStatus } from "../../contract/task-contract.js";
import type { AsyncDialect } from "../../config/schema/channel-schema.js";
import type { ResponseState } from "./response-state.js";

export type { TaskError, TaskStatus } from "../../contract/task-contract.js";
export { isFinished } from "../../contract/task-contract.js";

/** What is kept about one generated image; its bytes are stored apart. */
export interface TaskImage {
  mime: string;
  bytes: number;
  revised_prompt?: string;
  /** Its key in the image store. */
  key: string;
}

/**
 * An input image of an edit task, as kept with the record; its bytes are in
 * the image store until the task finishes.
 */
export interface TaskInput {
  /** The form field it is sent to the channel in: `image`, `image[]` or `mask`. */
  field: "image" | "image[]" | "mask";
  mime: string;
  bytes: number;
  /** Its key in the image store. */
  key: string;
}

/** Where the event of a finished task is delivered. */
export interface TaskWebhook {
  /** The receiver, as `validateWebhookUrl` normalised it. Never shown by GET or the list. */
  url: string;
  /** The origin the task was submitted at: the base of the image URLs in the event. */
  baseUrl: string;
}

/**
 * The job a channel with an async API (`channels[].async`) runs a task's
 * generation as: kept the moment the channel answers the submission, so
 * that whichever run holds the task next polls it instead of submitting again.
 */
export interface UpstreamJob {
  /** The channel's name (`channels[].name`). */
  channel: string;
  dialect: AsyncDialect;
  /** The channel's id of the job. */
  id: string;
}

/**
 * A task as stored. Never holds a channel key, and a client's key only sealed
 * (`sealedCredential`, forward mode) and only while the task is unfinished.
 */
export interface TaskRecord {
  id: string;
  /** The principal's subject; only it may see the task. */
  owner: string;
  status: TaskStatus;
  model: string;
  /**
   * `edit`: the channel's `/images/edits` with {@link inputs}; `generation`
   * (or absent, as in records written before edits): `/images/generations`;
   * `response`: a background response (`/responses`, see {@link response}).
   */
  kind?: "generation" | "edit" | "response";
  /** The body sent to the channel (an edit's form fields besides its files). */
  request: Record<string, unknown>;
  /** An edit's input images, in the order they are sent. */
  inputs?: TaskInput[];
  /** Set when the submission named a `webhook_url`. */
  webhook?: TaskWebhook;
  responseFormat: "url" | "b64_json";
  /** Unix seconds, as OpenAI's `created`. */
  created: number;
  /** The same in milliseconds (records of earlier releases have only `created`): for `queue_ms`. */
  createdMs?: number;
  started_at?: number;
  /**
   * `started_at` in milliseconds, from which the task's timeout counts; kept,
   * like `started_at`, when a poll is handed to another run.
   */
  startedMs?: number;
  /** The channel's job running the generation, once submitted (see {@link UpstreamJob}). */
  upstream?: UpstreamJob;
  completed_at?: number;
  expires_at?: number;
  /**
   * Runs started so far; bounds re-runs after a crash, and names the run that
   * holds the task's lease (only it may write the task's end).
   */
  attempts: number;
  images?: TaskImage[];
  /** Partial images the submission asked for (1 to 3); absent: none, the run is not streamed. */
  partialImages?: number;
  /**
   * The partial images the current run kept so far, oldest first (index =
   * `partial_image_index`); a new run starts without any.
   */
  partials?: TaskImage[];
  usage?: unknown;
  error?: TaskError;
  /**
   * Forward mode: the submitter's own key, sealed (AES-256-GCM, bound to this
   * task's id), to run the task upstream with it. Deleted by the transition
   * that finishes the task.
   */
  sealedCredential?: string;
  /** The submitter's `key_name` (a configured key's name, a fingerprint, a JWT `sub`): for task lines. */
  keyName?: string;
  /** The submitter's group (bounded: a configured one, or `forward`): its token counts' label. */
  group?: string;
  /** The submission's `req_id` (`X-Request-Id`): task lines carry it, to tie them to its access line. */
  reqId?: string;
  /**
   * The submission's span as a W3C `traceparent`, when tracing: the replica
   * that runs the task continues its trace.
   */
  trace?: string;
  /** A background response's own state (`kind: "response"`); its `request` is the Responses body. */
  response?: ResponseState;
  /**
   * The async dialect it was submitted in, which decides how it is shown;
   * absent: the service's own (records of earlier releases too).
   */
  dialect?: "sub2api" | "bifrost";
  /**
   * Seconds the task is kept once finished, where its submission asked for
   * less than `imageTasks.retentionSec` (Bifrost's
   * `x-bf-async-job-result-ttl`); absent: `imageTasks.retentionSec`.
   */
  retentionSec?: number;
  /**
   * Failed on a channel's error answer: the status the synchronous route
   * answers for it (the channel's own, passed on). The dialects show it.
   */
  failureStatus?: number;
}

/** Transitions a record may make; anything else is a bug or a race lost. */
const LEGAL: Record<TaskStatus, readonly TaskStatus[]> = {
  queued: ["in_progress", "failed"],
  // Back to queued when a stopping process hands its task back; in_progress again
  // when a new lease re-runs a task whose earlier run ended with its holder.
  in_progress: ["completed", "failed", "queued", "in_progress"],
  completed: [],
  failed: [],
};

/** Whether `from -> to` is a legal move. */
function canTransition(from: TaskStatus, to: TaskStatus): boolean {
  return LEGAL[from].includes(to);
}

/**
 * The record a store's `transition` writes: `current` with `patch` laid over
 * it, or undefined when `current` is gone, not at `expected`, or (given
 * `attempts`) at another run. Every store merges through this, so a field
 * patched to undefined is gone in every backend alike. Throws on an illegal
 * move, which is a bug, not a race.
 */
export function transitionRecord<T extends TaskRecord>(
  current: T | undefined,
  expected: TaskStatus,
  patch: Partial<TaskRecord> & { status: TaskStatus },
  attempts?: number,
): T | undefined {
  if (!canTransition(expected, patch.status)) {
    throw new Error(`illegal task transition ${expected} -> ${patch.status}`);
  }
  if (!current || current.status !== expected) return undefined;
  if (attempts !== undefined && current.attempts !== attempts) return undefined;
  const next = { ...current, ...patch } as T;
  for (const key of Object.keys(patch) as Array<keyof TaskRecord>) {
    if (patch[key] === undefined) delete next[key];
  }
  return next;
}

/** The image store keys a record holds: its results', its partial images' and an edit's inputs'. */
export function imageKeysOf(record: {
  images?: readonly TaskImage[];
  partials?: readonly TaskImage[];
  inputs?: readonly TaskInput[];
}): string[] {
  return [...(record.images ?? []), ...(record.partials ?? []), ...(record.inputs ?? [])].map(
    (item) => item.key,
  );
}

/** 128 random bits (base64url, 22 characters); each bit is used once. */
function randomPart(): string {
  const at = drawRandom(16);
  return randomPool.toString("base64url", at, at + 16);
}

/**
 * `task_` (or another `prefix`: sub2api's `imgtask_`) and 128 random bits
 * (base64url, 22 characters).
 */
export function newTaskId(prefix: "task_" | "imgtask_" = "task_"): string {
  return `${prefix}${randomPart()}`;
}

/** A background response's id: `resp_` and 128 random bits (base64url, 22 characters). */
export function newResponseId(): string {
  return `resp_${randomPart()}`;
}

/**
 * Seconds a task is kept once finished: its own retention where it asked for
 * less, else `configuredSec` (`imageTasks.retentionSec`, which also caps it).
 */
export function retentionSecOf(record: Pick<TaskRecord, "retentionSec">, configuredSec: number) {
  const own = record.retentionSec;
  return own !== undefined && own > 0 && own < configuredSec ? own : configuredSec;
}

/**
 * When the task was created, in milliseconds: `createdMs`, or for a record
 * of an earlier release `created` (whole seconds, OpenAI's field).
 */
export function createdMsOf(record: Pick<TaskRecord, "created" | "createdMs">): number {
  return record.createdMs ?? record.created * 1000;
}

/**
 * The images a task's request asks for: its `n` (an integer from 1 to 10, as its submission
 * was read); 1 when it names none or one of any other shape.
 */
export function imagesAsked(request: Record<string, unknown>): number {
  const { n } = request;
  return typeof n === "number" && Number.isInteger(n) && n >= 1 ? Math.min(10, n) : 1;
}

/**
 * When the task's run started, in milliseconds: `startedMs`, else
 * `started_at` (whole seconds); undefined before a run started.
 */
export function startedMsOf(
  record: Pick<TaskRecord, "started_at" | "startedMs">,
): number | undefined {
  if (record.startedMs !== undefined) return record.startedMs;
  return record.started_at === undefined ? undefined : record.started_at * 1000;
}
