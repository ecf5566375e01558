import type { Principal } from "../../auth/principal.js";
import { isResponseId } from "../../contract/task-contract.js";
import { ServiceError } from "../../errors/service-error.js";
import { shorten } from "../../errors/shorten.js";
import { shuttingDown } from "../../errors/shutting-down.js";
import { available } from "../../errors/store-unavailable.js";
import { REFUSAL_REASONS } from "../../metrics/readiness-metrics.js";
import { ALWAYS_AVAILABLE, type StoreAvailability } from "../core/store-availability.js";
import { imageKeysOf, isFinished, type TaskRecord } from "../core/task-record.js";
import type { TaskFeed } from "../events/task-feed.js";
import type { TaskImages } from "../images/task-images.js";
import { cancelTask } from "../service/cancel-task.js";
import type { TaskFinisher } from "../service/task-finisher.js";
import type { Submitted } from "../service/submit-task.js";
import type { SubmitOptions } from "../service/submission.js";
import { followResponseEvents, type ResponseFollow } from "./follow-response-events.js";
import {
  submitResponse,
  type BackgroundRequest,
  type SubmitResponseDeps,
} from "./submit-response.js";

export type { BackgroundRequest } from "./submit-response.js";

/** Dependencies of {@link createResponseService}. */
export interface ResponseServiceDeps extends Omit<SubmitResponseDeps, "images" | "finisher"> {
  images: Pick<TaskImages, "deleteResults" | "putInputs" | "deleteInputs">;
  finisher: TaskFinisher;
  feed: TaskFeed;
  stores?: StoreAvailability;
}

/** Where a later request's `previous_response_id` naming a background response is sent. */
export interface PreviousResponse {
  /** The channel that ran it. */
  channel: string;
  /** Its id there. */
  upstreamId: string;
}

/**
 * Background responses (`POST /v1/responses` with `background: true`) as
 * tasks: create, read, cancel, delete, follow their events, and resolve a
 * `previous_response_id` that names one. The same whatever the transport.
 */
export interface ResponseService {
  create(
    principal: Principal,
    request: BackgroundRequest,
    options: SubmitOptions,
  ): Promise<Submitted>;
  /**
   * The background response `id` if the service made it (whoever owns it),
   * else undefined: an id it did not make belongs to a channel.
   */
  lookup(id: string): Promise<TaskRecord | undefined>;
  /** A background response the principal owns, else 404 `response_not_found`. */
  get(principal: Principal, id: string): Promise<TaskRecord>;
  cancel(principal: Principal, record: TaskRecord): Promise<TaskRecord>;
  /** Cancels it if it runs, then deletes it, its images and its events; 404 from then on. */
  delete(principal: Principal, record: TaskRecord): Promise<void>;
  /** Its events after `after`, as `followResponseEvents` sends them. */
  follow(
    principal: Principal,
    record: TaskRecord,
    options: Pick<ResponseFollow, "after" | "signal" | "send">,
  ): Promise<void>;
  /**
   * Where a `previous_response_id` naming one of the principal's background
   * responses goes; undefined when the service did not make it.
   * @throws ServiceError 404 for another key's, 400 for one that cannot be continued
   */
  previous(principal: Principal, id: string): Promise<PreviousResponse | undefined>;
  /** New background responses get 503 from now on (the service is stopping). */
  stopAccepting(): void;
}

/** The same 404 for an unknown id and another key's, so ids cannot be probed. */
export function responseNotFound(id: string, param: string | null = null): ServiceError {
  return new ServiceError("response_not_found", `No response found with id '${shorten(id)}'.`, {
    param,
  });
}

export function createResponseService(deps: ResponseServiceDeps): ResponseService {
  const { store, log } = deps;
  const stores = deps.stores ?? ALWAYS_AVAILABLE;
  let stopping = false;
  const nowSec = () => Math.floor(deps.now() / 1000);

  const lookup = async (id: string): Promise<TaskRecord | undefined> => {
    if (!isResponseId(id)) return undefined;
    const record = await available(() => store.get(id));
    return record?.kind === "response" ? record : undefined;
  };
  const owned = (
    principal: Principal,
    record: TaskRecord | undefined,
    id: string,
    param?: string,
  ) => {
    const expired =
      record && isFinished(record.status) && (record.expires_at ?? Infinity) <= nowSec();
    if (!record || expired || record.owner !== principal.subject) throw responseNotFound(id, param);
    return record;
  };
  const get = async (principal: Principal, id: string) => owned(principal, await lookup(id), id);

  return {
    async create(principal, request, options) {
      try {
        if (stopping) throw shuttingDown();
        const refusal = stores.refusal();
        // A response that makes no image needs no image store.
        if (refusal && (refusal.code !== "storage_unavailable" || asksForImages(request.body))) {
          throw refusal;
        }
        return await submitResponse(deps, principal, request, options);
      } catch (err) {
        countRefusal(deps, stores, err);
        throw err;
      }
    },
    lookup,
    get,
    cancel: (_principal, record) => cancelTask(deps, record),
    async delete(_principal, record) {
      let current = record;
      if (!isFinished(current.status)) current = await cancelTask(deps, current);
      // The record and every index entry go in one step, as an image task's delete.
      const deleted = await available(() => store.delete(current.id));
      if (!deleted) throw responseNotFound(record.id);
      await Promise.all([
        deps.images.deleteResults(imageKeysOf(deleted).map((key) => ({ key, mime: "", bytes: 0 }))),
        log.delete(record.id),
      ]).catch((err: unknown) => {
        deps.logger.warn({ err, taskId: record.id }, "could not delete a response's images yet");
      });
    },
    follow: (principal, record, options) =>
      followResponseEvents({
        id: record.id,
        known: record,
        read: () => get(principal, record.id),
        log,
        feed: deps.feed,
        ...options,
      }),
    async previous(principal, id) {
      const found = await lookup(id);
      if (!found) return undefined;
      const record = owned(principal, found, id, "previous_response_id");
      const { channel, upstreamId } = record.response ?? {};
      if (record.status !== "completed" || channel === undefined || upstreamId === undefined) {
        throw new ServiceError(
          "invalid_value",
          `Previous response '${shorten(id)}' cannot be continued: it has not completed, or its channel kept no id for it.`,
          { param: "previous_response_id" },
        );
      }
      return { channel, upstreamId };
    },
    stopAccepting() {
      stopping = true;
    },
  };
}

/** Whether a Responses body names the `image_generation` tool. */
export function asksForImages(body: Record<string, unknown>): boolean {
  const { tools } = body;
  return (
    Array.isArray(tools) &&
    tools.some((tool) => (tool as { type?: unknown } | null)?.type === "image_generation")
  );
}

/** Counts a refused submission by its bounded reason, as image tasks' are. */
function countRefusal(deps: ResponseServiceDeps, stores: StoreAvailability, err: unknown): void {
  if (!(err instanceof ServiceError)) return;
  const reason = err.code === "service_unavailable" ? "shutting_down" : err.code;
  if (!REFUSAL_REASONS.has(reason)) return;
  deps.metrics.taskSubmissionsRefused.inc({ reason });
  if (reason === "store_unavailable") stores.storeFailed();
  if (reason === "storage_unavailable") stores.imagesFailed();
}
