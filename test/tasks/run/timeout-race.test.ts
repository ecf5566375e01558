import { slow } from "../../support/time-factor.js";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { getTask, submitOk, useApp, waitUntil } from "../task-api.js";

/*
 * A task whose timeout passes ends `failed` with code `timeout`, whichever
 * timer fires first: the task's own deadline, or the channel's silence timer.
 * undici counts its timers in ticks of 499 ms from the tick before they were
 * set, so one set to the task's timeout may fire up to 2 ms per second of it
 * before the deadline, depending on where between two ticks it was set. Fifty
 * tasks against a channel that never answers, submitted over a second so
 * that they fall on every part of a tick, with a timeout of 20 s: with the
 * two timers at one time, about 40 ms of each 499 lose the race, and one
 * task or more of the fifty ends `upstream_timeout` in most runs.
 */

const TASKS = 50;
const TIMEOUT_SEC = 20;

describe("a task past its timeout", () => {
  it(
    `always ends failed/timeout: ${TASKS} tasks on a channel that hangs`,
    async () => {
      const app = await useApp({
        imageTasks: {
          timeoutSec: TIMEOUT_SEC,
          maxConcurrent: TASKS,
          maxQueued: TASKS * 2,
          maxQueuedPerKey: TASKS,
        },
      });
      app.upstream.behave("images", { kind: "hang" });
      const ids: string[] = [];
      const firstAt = Date.now();
      for (let n = 0; n < TASKS; n += 1) {
        ids.push(await submitOk(app, { prompt: `hang ${n}` }));
        await sleep(20);
      }
      // No task can end well before its timeout: reading fifty tasks every 25 ms until then cost
      // the suite about 10 s of CPU for nothing. One that ended early is still read below.
      await sleep(Math.max(0, firstAt + (TIMEOUT_SEC - 1) * 1000 - Date.now()));
      const ends = new Map<string, { status: string; code?: string | null }>();
      await waitUntil(
        async () => {
          for (const id of ids) {
            if (ends.has(id)) continue;
            const { body } = await getTask(app, id);
            if (body.status === "completed" || body.status === "failed") {
              ends.set(id, { status: body.status, code: body.error?.code });
            }
          }
          return ends.size === TASKS;
        },
        "every task to end",
        TIMEOUT_SEC * 1000 + 30_000,
      );
      const codes = new Map<string, number>();
      for (const end of ends.values()) {
        const key = `${end.status}/${end.code ?? "-"}`;
        codes.set(key, (codes.get(key) ?? 0) + 1);
      }
      expect(Object.fromEntries(codes)).toEqual({ "failed/timeout": TASKS });
    },
    slow(90_000),
  );
});
