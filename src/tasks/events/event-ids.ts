import type { TaskStage } from "../core/task-events.js";
import type { TaskRecord } from "../core/task-record.js";

/**
 * Where an event stands in its task's life: `[run, step]`, compared in that
 * order. `queued` is `[0, 0]`; run `a` (the record's `attempts` once it
 * started) is `[a, 0]` when it starts and `[a, k + 1]` at its partial image
 * `k`; the final event is `[Infinity, 0]`.
 */
export type EventPosition = readonly [run: number, step: number];

/** One event of a task: its stage, id, and the partial image it announces. */
export interface StageEvent {
  stage: TaskStage;
  id: string;
  position: EventPosition;
  partialIndex?: number;
}

const FINAL_ID = "final";

/**
 * The `id:` of an event, derived from the task's own state (run and step), so
 * that any replica, reading only the task, knows which events a reconnecting
 * client has seen: `0` (queued), `<run>.0` (started), `<run>.<k+1>` (partial
 * image k), `final`.
 */
export function stageEvent(
  stage: TaskStage,
  record: Pick<TaskRecord, "attempts">,
  partialIndex?: number,
): StageEvent {
  switch (stage) {
    case "queued":
      return { stage, id: "0", position: [0, 0] };
    case "in_progress":
      return { stage, id: `${record.attempts}.0`, position: [record.attempts, 0] };
    case "partial_image": {
      const step = (partialIndex ?? 0) + 1;
      return {
        stage,
        id: `${record.attempts}.${step}`,
        position: [record.attempts, step],
        partialIndex: partialIndex ?? 0,
      };
    }
    default:
      return { stage, id: FINAL_ID, position: [Infinity, 0] };
  }
}

/**
 * The position a `Last-Event-ID` names; undefined for anything that is not
 * one of our ids (the stream then starts from the beginning).
 */
export function parseEventId(text: string | undefined): EventPosition | undefined {
  if (text === undefined) return undefined;
  const id = text.trim();
  if (id === FINAL_ID) return [Infinity, 0];
  if (id === "0") return [0, 0];
  const match = /^(\d{1,6})\.(\d{1,4})$/.exec(id);
  return match ? [Number(match[1]), Number(match[2])] : undefined;
}

/** Whether `a` comes after `b`. */
export function isAfter(a: EventPosition, b: EventPosition): boolean {
  return a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
}

/**
 * The events a task's state stands for, oldest first: what a watcher that
 * saw none of them is sent. A queued task: `queued`. A running one: its
 * run's start and each partial image kept so far. A finished one: only its
 * final event (what came before no longer shows in the task).
 */
export function eventsSoFar(record: TaskRecord): StageEvent[] {
  switch (record.status) {
    case "queued":
      return [stageEvent("queued", record)];
    case "in_progress":
      return [
        stageEvent("in_progress", record),
        ...(record.partials ?? []).map((_, index) => stageEvent("partial_image", record, index)),
      ];
    default:
      return [stageEvent(record.status, record)];
  }
}
