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
  const s: WebhookQueueState = {
    journal: options.journal,
    logger: options.logger,
    now: options.now ?? Date.now,
    pending: new Map(),
    inFlight: new Map(),
    attempt: undefined,
    stopped: false,
  };
  return {
    async add(delivery: WebhookDelivery) {
      if (s.pending.has(delivery.eventId)) return;
      const entry: PendingDelivery = { delivery, attempt: 1, dueAt: s.now() };
      await s.journal.save(entry);
      track(s, entry);
    },
    async start(attemptDelivery) {
      s.attempt = attemptDelivery;
      s.stopped = false;
      for (const entry of await s.journal.list()) track(s, entry);
      for (const { entry } of s.pending.values()) schedule(s, entry);
    },
    stop: (graceMs) => stop(s, graceMs),
  };
}

/** What the queue's steps share. */
interface WebhookQueueState {
  journal: WebhookJournal;
  logger: Logger;
  now: () => number;
  pending: Map<string, { entry: PendingDelivery; timer?: NodeJS.Timeout }>;
  inFlight: Map<string, { controller: AbortController; done: Promise<void> }>;
  /** Set by `start`: nothing is attempted before. */
  attempt: AttemptDelivery | undefined;
  stopped: boolean;
}

function track(s: WebhookQueueState, entry: PendingDelivery): void {
  if (s.pending.has(entry.delivery.eventId)) return;
  s.pending.set(entry.delivery.eventId, { entry });
  schedule(s, entry);
}

/** Sets the delivery's timer for its next attempt (none before `start` or after `stop`). */
function schedule(s: WebhookQueueState, entry: PendingDelivery): void {
  const { eventId } = entry.delivery;
  const state = s.pending.get(eventId);
  if (!state) return;
  state.entry = entry;
  clearTimeout(state.timer);
  if (!s.attempt || s.stopped) return;
  state.timer = setTimeout(
    () => run(s, eventId),
    Math.min(Math.max(0, entry.dueAt - s.now()), MAX_TIMER_MS),
  );
  state.timer.unref();
}

/** A delivery's timer fired: its attempt starts, unless one is in flight. */
function run(s: WebhookQueueState, eventId: string): void {
  const state = s.pending.get(eventId);
  if (!state || s.stopped || s.inFlight.has(eventId)) return;
  // A wait longer than a timer takes is slept in steps.
  if (state.entry.dueAt > s.now()) return schedule(s, state.entry);
  const controller = new AbortController();
  const done = settle(s, state.entry, controller.signal)
    .catch((err: unknown) => {
      s.logger.warn({ err, eventId }, "webhook delivery step failed; retried at the next start");
    })
    .finally(() => s.inFlight.delete(eventId));
  s.inFlight.set(eventId, { controller, done });
}

/** One attempt, and what follows it: the delivery done, or its next attempt journalled. */
async function settle(
  s: WebhookQueueState,
  entry: PendingDelivery,
  signal: AbortSignal,
): Promise<void> {
  const { delivery } = entry;
  const attempt = s.attempt!;
  let report;
  try {
    report = await attempt(delivery, entry.attempt, { signal });
  } catch (err) {
    // Stopped mid-attempt: the journal still names this attempt, for the next start.
    if (signal.aborted) return;
    throw err;
  }
  if (report.next.action === "done") {
    s.pending.delete(delivery.eventId);
    await s.journal.remove(delivery.eventId);
    return;
  }
  const next: PendingDelivery = {
    delivery,
    attempt: entry.attempt + 1,
    dueAt: s.now() + report.next.delayMs,
  };
  await s.journal.save(next);
  schedule(s, next);
}

/** Attempts in flight get `graceMs` to end, then are aborted (and made again at the next start). */
async function stop(s: WebhookQueueState, graceMs: number): Promise<void> {
  s.stopped = true;
  for (const state of s.pending.values()) clearTimeout(state.timer);
  const running = [...s.inFlight.values()];
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(running.map(({ done }) => done)),
    new Promise((resolve) => (timer = setTimeout(resolve, graceMs))),
  ]);
  clearTimeout(timer);
  for (const { controller } of s.inFlight.values()) controller.abort(new Error("stopping"));
  await Promise.all(running.map(({ done }) => done));
}
