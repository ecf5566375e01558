import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../../auth/principal.js";
import { ServiceError } from "../../errors/service-error.js";
import type { ImageTasks } from "../create-image-tasks.js";
import type { Submission } from "../service/task-service.js";

/**
 * Whether a submission asks to be answered with the new task's event stream
 * (`Accept: text/event-stream`, not refused with `q=0`).
 */
export function wantsEventStream(req: IncomingMessage): boolean {
  const accept = req.headers.accept;
  if (!accept) return false;
  return accept
    .split(",")
    .some(
      (range) =>
        /^\s*text\/event-stream\s*(;|$)/i.test(range) && !/;\s*q=0(\.0*)?\s*(;|$)/i.test(range),
    );
}

/** The `Idempotency-Key` header: 1 to 255 characters, when sent. */
export function idempotencyKeyOf(req: IncomingMessage): string | undefined {
  const value = req.headers["idempotency-key"];
  const key = Array.isArray(value) ? value.join(", ") : value;
  if (key !== undefined && (key.length === 0 || key.length > 255)) {
    throw new ServiceError("invalid_value", "Idempotency-Key must be 1 to 255 characters.", {
      param: "Idempotency-Key",
    });
  }
  return key;
}

/**
 * Submit and watch in one request: creates the task (or replays it, with
 * `Idempotency-Key`) as a plain submission does, then answers 200 with its
 * event stream, starting with its `queued` event; `Location` names the task.
 * A refused submission is answered as usual, before any stream.
 */
export async function submitAndWatch(
  tasks: Pick<ImageTasks, "service" | "eventStreams">,
  req: IncomingMessage,
  res: ServerResponse,
  principal: Principal,
  submission: Submission,
  baseUrl: string,
): Promise<void> {
  const idempotencyKey = idempotencyKeyOf(req);
  const { record, replayed } = await tasks.service.submit(principal, submission, {
    idempotencyKey,
    baseUrl,
  });
  await tasks.eventStreams.watchSubmitted(res, principal, record, baseUrl, {
    Location: `${baseUrl}/v1/images/tasks/${record.id}`,
    ...(replayed ? { "Idempotent-Replayed": "true" } : {}),
  });
}
