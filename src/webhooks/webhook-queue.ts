import type { WebhookAttemptReport } from "./create-webhook-deliverer.js";
import type { WebhookDelivery } from "./webhook-delivery.js";

/**
 * Makes attempt number `attempt` (1-based) of a delivery; rejects only with
 * `signal`'s reason when the queue stops it (not counted as an attempt).
 * `WebhookDeliverer.attempt` is one.
 */
export type AttemptDelivery = (
  delivery: WebhookDelivery,
  attempt: number,
  options: { signal: AbortSignal },
) => Promise<WebhookAttemptReport>;

/**
 * Carries webhook deliveries from the moment their task finished to their
 * last attempt: at least once, one attempt of an event at a time, retried on
 * the schedule (`report.next`), apart from the task queue so that no
 * delivery ever waits for or takes a task slot. Deliveries outlive the
 * process where the store does (SQLite: the store's journal; Redis: BullMQ).
 */
export interface WebhookQueue {
  /** Takes a delivery; idempotent per `eventId` while the delivery is pending. */
  add(delivery: WebhookDelivery): Promise<void>;
  /** Picks up pending deliveries (a restart's) and starts attempting. */
  start(attempt: AttemptDelivery): Promise<void>;
  /**
   * Stops attempting: attempts in flight get `graceMs`, then are aborted and
   * made again later (by the next process, or another replica), not counted.
   */
  stop(graceMs: number): Promise<void>;
}

/** A delivery waiting for its next attempt, as the embedded stores keep it. */
export interface PendingDelivery {
  delivery: WebhookDelivery;
  /** The number of the next attempt, 1 for the first. */
  attempt: number;
  /** Milliseconds since the epoch when that attempt is due. */
  dueAt: number;
}

/**
 * Where the in-process webhook queue keeps its pending deliveries, so that
 * they survive a restart: the embedded task store (SQLite on disk; memory
 * for the process's life).
 */
export interface WebhookJournal {
  list(): Promise<PendingDelivery[]>;
  /** Writes (or overwrites) the delivery's entry, by `delivery.eventId`. */
  save(pending: PendingDelivery): Promise<void>;
  remove(eventId: string): Promise<void>;
}
