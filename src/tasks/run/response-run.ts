import type { Logger } from "pino";
import type { ResponseEventLog, ResponseStatus } from "../core/response-state.js";
import type { TaskRecord } from "../core/task-record.js";
import { imageFields } from "../responses/response-images.js";
import { ownObject, responseShell } from "../responses/response-object.js";
import type { ResponseImages } from "./keep-response-images.js";
import { invalidResponse } from "./decode-generation.js";
import { isObject } from "./json-object-of.js";

type Json = Record<string, unknown>;

/** The status a final event gives its response. */
const FINAL_STATUS: Readonly<Record<string, ResponseStatus>> = {
  "response.completed": "completed",
  "response.incomplete": "incomplete",
  "response.failed": "failed",
};

/** Events of the channel's that stand for the service's own (its response id, its queue). */
const CHANNEL_OWN_EVENTS = new Set(["response.created", "response.in_progress", "response.queued"]);

/**
 * Says an image call made its image, one event before the item that holds it: held until that
 * item shows whether its result was one, so that a call shown `failed` is not first announced
 * as completed (OpenAI's stream has no failed event for an image call to send instead).
 */
const IMAGE_CALL_COMPLETED = "response.image_generation_call.completed";
/** Image calls whose completed event is held at once, at most: past that, one goes on as sent. */
const MAX_HELD = 16;

/**
 * A final response's `output`, when it has one, is a list of items (objects): clients walk it
 * (the SDKs' `output_text`), so anything else is no answer of OpenAI's shape.
 * @throws TaskFailure `invalid_response`
 */
function checkOutput(response: Json): void {
  const { output } = response;
  if (output === undefined) return;
  if (!Array.isArray(output) || !output.every(isObject)) {
    throw invalidResponse("has a final response whose output is not a list of items");
  }
}

/**
 * One run of a background response, event by event: what the channel
 * streams is made the service's (its response id, images kept apart as
 * references) and logged where every replica reads it, numbered from where
 * the log stands. The channel's own `response.created` and
 * `response.in_progress` (about its id) give way to the service's
 * `response.in_progress`; its final event (`response.completed`,
 * `response.incomplete`, `response.failed`) is the response's end.
 */
export class ResponseRun {
  /** The channel's id of the response, once it named one. */
  upstreamId: string | undefined;
  /** The final Response object, once its final event came. */
  final: Json | undefined;
  /** An `error` event's code and message, when the channel sent one. */
  streamError: { code: string; message: string } | undefined;
  /** Events logged so far for this response (all runs): the next event's sequence number. */
  events = 0;
  private logFailed = false;
  /** {@link IMAGE_CALL_COMPLETED} events waiting for their items, by the item's id. */
  private readonly heldCompleted = new Map<string, Json>();

  constructor(
    private readonly log: ResponseEventLog,
    private readonly logger: Logger,
    private readonly record: TaskRecord,
    private readonly images: ResponseImages,
  ) {}

  /** The service's `response.in_progress`, when the run starts. */
  begin(): Promise<void> {
    const response = responseShell(this.record, "in_progress");
    return this.append("response.in_progress", { type: "response.in_progress", response });
  }

  /**
   * Takes one event of the channel's stream (or its whole answer, a Response
   * object without `type`).
   * @throws TaskFailure `invalid_response` for a final event without its response; TaskFailure /
   *   RunLost from keeping its images
   */
  async take(event: Json): Promise<void> {
    if (event.type === undefined || event.type === "response") {
      await this.takeObject(event);
      return;
    }
    const type = String(event.type);
    if (CHANNEL_OWN_EVENTS.has(type)) {
      this.noteUpstream(event.response);
      return;
    }
    if (
      type === IMAGE_CALL_COMPLETED &&
      typeof event.item_id === "string" &&
      this.heldCompleted.size < MAX_HELD
    ) {
      delete event.sequence_number;
      this.heldCompleted.set(event.item_id, event);
      return;
    }
    for (const field of imageFields(event)) {
      // A partial image that could not be kept: its event is left out.
      if (!(await this.images.keep(field))) return;
    }
    const status = FINAL_STATUS[type];
    // A final event must carry the response it ends: clients read their answer from it.
    if (status !== undefined) {
      if (!isObject(event.response)) {
        throw invalidResponse(`has a ${type} event without a response object`);
      }
      checkOutput(event.response);
    }
    if (isObject(event.response)) {
      this.noteUpstream(event.response);
      event.response = ownObject(this.record, event.response, status);
      if (status) this.final = event.response as Json;
    }
    if (type === "error") {
      this.streamError = {
        code: typeof event.code === "string" ? event.code : "server_error",
        message: typeof event.message === "string" ? event.message : "The channel sent an error.",
      };
    }
    delete event.sequence_number;
    if (type === "response.output_item.done") await this.releaseHeld(event.item);
    if (status !== undefined) await this.releaseAllHeld(event.response);
    await this.append(type, event, status !== undefined);
  }

  /**
   * Logs the held {@link IMAGE_CALL_COMPLETED} event of `item` right before the item's
   * `output_item.done`, unless the item shows the call failed (its result was no image).
   */
  private async releaseHeld(item: unknown): Promise<void> {
    if (!isObject(item) || typeof item.id !== "string") return;
    const held = this.heldCompleted.get(item.id);
    if (!held) return;
    this.heldCompleted.delete(item.id);
    if (item.status !== "failed") await this.append(IMAGE_CALL_COMPLETED, held);
  }

  /**
   * Before the final event: the held events whose `output_item.done` never came, each as its
   * item in the final response shows it (left out when that shows the call failed).
   */
  private async releaseAllHeld(response: unknown): Promise<void> {
    const output = isObject(response) && Array.isArray(response.output) ? response.output : [];
    for (const [id, held] of this.heldCompleted) {
      const item: unknown = output.find((entry) => isObject(entry) && entry.id === id);
      if (!isObject(item) || item.status !== "failed")
        await this.append(IMAGE_CALL_COMPLETED, held);
    }
    this.heldCompleted.clear();
  }

  /** A channel that answered with the finished Response object instead of a stream. */
  private async takeObject(object: Json): Promise<void> {
    checkOutput(object);
    for (const field of imageFields(object)) await this.images.keep(field);
    this.noteUpstream(object);
    const status =
      object.status === "incomplete" || object.status === "failed" ? object.status : "completed";
    this.final = ownObject(this.record, object, status);
    const type = `response.${status}`;
    await this.append(type, { type, response: this.final }, true);
  }

  private noteUpstream(response: unknown): void {
    if (this.upstreamId === undefined && isObject(response) && typeof response.id === "string") {
      this.upstreamId = response.id.slice(0, 200);
    }
  }

  /**
   * Logs one event; a log that is full or cannot be written is warned of once
   * and the run goes on (the response's end is kept in its record whatever).
   */
  private async append(type: string, event: Json, final = false): Promise<void> {
    const json = JSON.stringify(event);
    try {
      const seq = await this.log.append(this.record.id, [{ type, json }], { final });
      if (seq === undefined) {
        this.warnOnce(undefined, "a background response's event log is full; events are left out");
        return;
      }
      this.events = seq + 1;
    } catch (err) {
      this.warnOnce(err, "could not log a background response's event; streams miss it");
    }
  }

  private warnOnce(err: unknown, message: string): void {
    if (this.logFailed) return;
    this.logFailed = true;
    this.logger.warn({ err, taskId: this.record.id }, message);
  }
}
