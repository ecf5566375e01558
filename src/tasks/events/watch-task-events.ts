import { available } from "../../errors/store-unavailable.js";
import type { TaskRecord } from "../core/task-record.js";
import {
  eventsSoFar,
  isAfter,
  stageEvent,
  type EventPosition,
  type StageEvent,
} from "./event-ids.js";
import type { FeedSignal, TaskFeed } from "./task-feed.js";

/** Where one watcher's events go: an SSE answer, or an MCP tool's progress. */
export interface EventSink {
  /** Aborts when the receiver is gone (the client closed, its wait is over). */
  signal: AbortSignal;
  /** Called once, before the first event (or when the stream starts without one). */
  open(): void;
  /** Delivers one event of `record`; false when the receiver is gone. */
  send(event: StageEvent, record: TaskRecord): Promise<boolean>;
  /** Instead of `open`: the receiver had the final event already, nothing is left to send. */
  noContent(): void;
  /** After `open`: the stream is over (final event sent, receiver gone, service stopping). */
  end(): void;
}

/** What {@link watchTaskEvents} follows and reads. */
export interface EventStreamRun {
  taskId: string;
  feed: TaskFeed;
  /** Reads the task as it is now (with the caller's ownership check). */
  read(): Promise<TaskRecord>;
  /** The task as already known (a submission's answer), sent before the first read. */
  known?: TaskRecord;
  /** The position of the last event the receiver has (`Last-Event-ID`); none: from the start. */
  after?: EventPosition;
  sink: EventSink;
  /** Told of a failure after the stream started (which then ends; the client resumes). */
  onLateError?: (err: unknown) => void;
}

/**
 * Serves one task's events: follows the task on the process's feed first
 * (buffering what arrives), then reads it, sends the events its state stands
 * for that the receiver has not seen, then each event the bus brings, in
 * order. Events are known by their position, so late or repeated ones are
 * dropped. Ends after the final event, when the receiver goes, or when the
 * service stops; after a cut in the bus (`resync`) it reads the task once
 * more. A failure before anything was sent rejects, for the caller to answer.
 */
export async function watchTaskEvents(run: EventStreamRun): Promise<void> {
  const { sink } = run;
  const signals: FeedSignal[] = [];
  let wake: (() => void) | undefined;
  const onGone = () => wake?.();
  sink.signal.addEventListener("abort", onGone, { once: true });
  const following = run.feed.follow(run.taskId, (signal) => {
    signals.push(signal);
    wake?.();
  });
  let last = run.after;
  let opened = false;
  /** The final event was sent, or the receiver had it already. */
  let finished = false;
  const open = () => {
    if (opened) return;
    opened = true;
    sink.open();
  };

  /** Sends `event` unless the receiver has it; whether the stream goes on. */
  const deliver = async (event: StageEvent, record: TaskRecord): Promise<boolean> => {
    if (!last || isAfter(event.position, last)) {
      open();
      if (!(await sink.send(event, record))) return false;
      last = event.position;
    }
    if (event.position[0] === Infinity) finished = true;
    return !finished && !sink.signal.aborted;
  };
  /** Sends what `record` stands for that the receiver has not seen; whether the stream goes on. */
  const catchUp = async (record: TaskRecord): Promise<boolean> => {
    for (const event of eventsSoFar(record)) {
      if (!(await deliver(event, record))) return false;
    }
    return true;
  };
  const nextSignal = async (): Promise<FeedSignal | undefined> => {
    while (!sink.signal.aborted && signals.length === 0) {
      await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
    }
    return sink.signal.aborted ? undefined : signals.shift();
  };

  try {
    if (run.known && !(await catchUp(run.known))) return;
    // Events sent from now on reach us: what the read misses, the feed brings.
    await available(() => following.ready);
    if (!(await catchUp(await run.read()))) return;
    open();
    for (let signal = await nextSignal(); signal; signal = await nextSignal()) {
      if (signal.type === "released") return;
      const more =
        signal.type === "resync"
          ? await catchUp(await run.read())
          : await deliver(
              stageEvent(signal.stage, signal.record, signal.partialIndex),
              signal.record,
            );
      if (!more) return;
    }
  } catch (err) {
    if (!opened) throw err;
    run.onLateError?.(err);
  } finally {
    following.unfollow();
    sink.signal.removeEventListener("abort", onGone);
    if (opened) sink.end();
    else if (finished && !sink.signal.aborted) sink.noContent();
  }
}
