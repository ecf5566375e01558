import { available } from "../../errors/store-unavailable.js";
import {
  FINAL_RESPONSE_EVENTS,
  responseStatusOf,
  type LoggedEvent,
  type ResponseEventLog,
} from "../core/response-state.js";
import { isFinished, type TaskRecord } from "../core/task-record.js";
import type { TaskFeed } from "../events/task-feed.js";
import { finalEvent } from "./present-response.js";

/** Events read from the log at once. */
const BATCH = 200;
/** The longest a quiet follower waits before it reads the log again. */
const MAX_POLL_MS = 1_000;
/** A follower reads the task again this often when nothing told it of an end. */
const RECHECK_MS = 5_000;

/** What {@link followResponseEvents} follows, and where the events go. */
export interface ResponseFollow {
  id: string;
  /** The sequence number of the last event the receiver has; -1: from the first. */
  after: number;
  /** The response as the caller read it (its owner checked). */
  known: TaskRecord;
  /** Reads it again (a deleted or expired response rejects). */
  read(): Promise<TaskRecord>;
  log: ResponseEventLog;
  feed: TaskFeed;
  /** Aborts when the receiver is gone. */
  signal: AbortSignal;
  /** Delivers one event; false when the receiver is gone. */
  send(event: LoggedEvent): Promise<boolean>;
}

/**
 * Sends a background response's events after `after`, as they are logged
 * (whichever replica runs it), until its final event: the log's, or one made
 * from the record when its end came from outside the run (a timeout, an
 * interrupted run: `response.failed`) or its log is gone. A cancelled
 * response's stream ends without a final event (the Responses API has none
 * for a cancel). New events wake it at once on the replica that logs them;
 * from other replicas they are read within the log's `pollMs` (a second
 * while the response has been quiet); its end is heard on the task bus (or
 * read every few seconds).
 */
export async function followResponseEvents(run: ResponseFollow): Promise<void> {
  const { id, log, signal } = run;
  const state = { finished: isFinished(run.known.status), released: false, recheck: false };
  let wake: (() => void) | undefined;
  let woken = false;
  const poke = () => {
    woken = true;
    wake?.();
  };
  const unlisten = log.onAppend(id, poke);
  const following = run.feed.follow(id, (heard) => {
    if (heard.type === "released") state.released = true;
    else if (heard.type === "resync") state.recheck = true;
    else if (isFinished(heard.record.status)) state.finished = true;
    poke();
  });
  signal.addEventListener("abort", poke);
  try {
    await available(() => following.ready);
    let next = run.after + 1;
    let checkedAt = Date.now();
    let pollMs = log.pollMs;
    for (;;) {
      if (signal.aborted || state.released) return;
      woken = false;
      const sent = await sendLogged(run, next);
      if (sent.ended) return;
      // A quiet response (an image being drawn) is read less often, up to once a second.
      pollMs = sent.next > next ? log.pollMs : Math.min(MAX_POLL_MS, pollMs * 2);
      next = sent.next;
      if (sent.full) continue;
      if (state.finished) {
        await sendEnd(run, next);
        return;
      }
      if (!woken) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.max(pollMs, log.pollMs));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
      if (state.recheck || Date.now() - checkedAt >= RECHECK_MS) {
        state.recheck = false;
        checkedAt = Date.now();
        if (isFinished((await run.read()).status)) state.finished = true;
      }
    }
  } finally {
    following.unfollow();
    unlisten();
    signal.removeEventListener("abort", poke);
  }
}

/** Sends what the log holds from `next` on (one batch); `ended` after a final event or a gone receiver. */
async function sendLogged(
  run: ResponseFollow,
  next: number,
): Promise<{ next: number; ended: boolean; full: boolean }> {
  const batch = await available(() => run.log.read(run.id, next - 1, BATCH));
  for (const event of batch) {
    if (!(await run.send(event))) return { next, ended: true, full: false };
    next = event.seq + 1;
    if (FINAL_RESPONSE_EVENTS.has(event.type)) return { next, ended: true, full: false };
  }
  return { next, ended: false, full: batch.length === BATCH };
}

/**
 * The end of a finished response's stream: what its log still holds, then,
 * when the log had no final event, the one its record stands for (not for a
 * cancel, nor one the receiver had already by its number).
 */
async function sendEnd(run: ResponseFollow, from: number): Promise<void> {
  const record = await run.read();
  let next = from;
  for (;;) {
    const sent = await sendLogged(run, next);
    if (sent.ended) return;
    next = sent.next;
    if (!sent.full) break;
  }
  if (responseStatusOf(record) === "cancelled") return;
  const logged = record.response?.events;
  // The run logged its final event as `logged - 1`: a receiver past it has it already.
  if (logged !== undefined && record.response?.final && next >= logged) return;
  const seq = logged !== undefined && record.response?.final ? logged - 1 : next;
  const event = finalEvent(record, Math.max(seq, next));
  if (event) await run.send(event);
}
