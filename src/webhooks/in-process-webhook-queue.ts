import type { Logger } from "pino";
import type { WebhookDelivery } from "./webhook-delivery.js";
import type {
  AttemptDelivery,
  PendingDelivery,
  WebhookJournal,
  WebhookQueue,
} from "./webhook-queue.js";

/** The longest delay a Node timer takes; a longer wait is taken in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Options of {@link createInProcessWebhookQueue}. */
export interface InProcessWebhookQueueOptions {
  /** Where pending deliveries are kept (the embedded store: on disk with SQLite). */
  journal: WebhookJournal;
  logger: Logger;
  /** Milliseconds since the epoch; injectable for tests. */
  now?: () => number;
}

/**
 * The webhook queue of the embedded stores, which belong to one process: a
 * timer per pending delivery, each delivery's next attempt and its due time
 * written to the journal before it is waited for, so a restart resumes the
 * schedule where it was (an attempt cut off by the stop is made again, with
 * the same number). One attempt of a delivery runs at a time; how many
 * deliveries attempt at once is the deliverer's limit.
 */
export function createInProcessWebhookQueue(options: InProcessWebhookQueueOptions): WebhookQueue {
  const { journal, logger } = options;
  const now = options.now ?? Date.now;
  const pending = new Map<string, { entry: PendingDelivery; timer?: NodeJS.Timeout }>();
  const inFlight = new Map<string, { controller: AbortController; done: Promise<void> }>();
  let attempt: AttemptDelivery | undefined;
  let stopped = false;

  const schedule = (entry: PendingDelivery) => {
    const { eventId } = entry.delivery;
    const state = pending.get(eventId);
    if (!state) return;
    state.entry = entry;
    clearTimeout(state.timer);
    if (!attempt || stopped) return;
    state.timer = setTimeout(
      () => run(eventId),
      Math.min(Math.max(0, entry.dueAt - now()), MAX_TIMER_MS),
    );
    state.timer.unref();
  };

  const settle = async (entry: PendingDelivery, signal: AbortSignal) => {
    const { delivery } = entry;
    let report;
    try {
      report = await attempt!(delivery, entry.attempt, { signal });
    } catch (err) {
      // Stopped mid-attempt: the journal still names this attempt, for the next start.
      if (signal.aborted) return;
      throw err;
    }
    if (report.next.action === "done") {
      pending.delete(delivery.eventId);
      await journal.remove(delivery.eventId);
      return;
    }
    const next: PendingDelivery = {
      delivery,
      attempt: entry.attempt + 1,
      dueAt: now() + report.next.delayMs,
    };
    await journal.save(next);
    schedule(next);
  };

  const run = (eventId: string) => {
    const state = pending.get(eventId);
    if (!state || stopped || inFlight.has(eventId)) return;
    // A wait longer than a timer takes is slept in steps.
    if (state.entry.dueAt > now()) return schedule(state.entry);
    const controller = new AbortController();
    const done = settle(state.entry, controller.signal)
      .catch((err: unknown) => {
        logger.warn({ err, eventId }, "webhook delivery step failed; retried at the next start");
      })
      .finally(() => inFlight.delete(eventId));
    inFlight.set(eventId, { controller, done });
  };

  const track = (entry: PendingDelivery) => {
    if (pending.has(entry.delivery.eventId)) return;
    pending.set(entry.delivery.eventId, { entry });
    schedule(entry);
  };

  return {
    async add(delivery: WebhookDelivery) {
      if (pending.has(delivery.eventId)) return;
      const entry: PendingDelivery = { delivery, attempt: 1, dueAt: now() };
      await journal.save(entry);
      track(entry);
    },

    async start(attemptDelivery) {
      attempt = attemptDelivery;
      stopped = false;
      for (const entry of await journal.list()) track(entry);
      for (const { entry } of pending.values()) schedule(entry);
    },

    async stop(graceMs) {
      stopped = true;
      for (const state of pending.values()) clearTimeout(state.timer);
      const running = [...inFlight.values()];
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(running.map(({ done }) => done)),
        new Promise((resolve) => (timer = setTimeout(resolve, graceMs))),
      ]);
      clearTimeout(timer);
      for (const { controller } of inFlight.values()) controller.abort(new Error("stopping"));
      await Promise.all(running.map(({ done }) => done));
    },
  };
}
