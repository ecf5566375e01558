import { leaseSec, slow } from "../../support/time-factor.js";
import { describe, expect, it } from "vitest";
import { pino } from "pino";
import { submitOk, waitForStatus, waitUntil } from "../task-api.js";
import { TINY_PNG_B64 } from "../../support/fake-answers.js";
import { dropLock, expectOneGeneration, marksOf, useReplicas } from "./lease-lapsed.js";

/*
 * A run's lease lapsed (lease-lapsed-mid-run.test.ts) while another replica is there to take
 * the job the queue hands out again: it waits for the run, which goes on and pays for the one
 * generation, or takes the task over when the run's replica stops.
 */

describe("a lease lost while the run pays for a generation, on replicas (Redis)", () => {
  it(
    "mid-call, the job handed to another replica: that replica waits for the run, one generation",
    async () => {
      const { prefix, upstream, start } = await useReplicas("unleased", leaseSec(2));
      const a = await start();
      const lines: Array<Record<string, unknown>> = [];
      const waiting = () => lines.some((line) => line.msg === "task.rerun_waits");
      // The generation is answered once the other replica has taken the job and waits for the
      // run (past the renewal that finds the lock gone, the stalled check, its grace and its
      // first look at the run's alive mark), not after a fixed delay, which a loaded machine
      // outlasted: the run then ended before the other replica took the job. At most 40 s
      // (stretched): the assertions below then say what did not happen.
      upstream.behave("images", {
        kind: "custom",
        respond: async (_req, res) => {
          await waitUntil(waiting, "the other replica waiting for the run", 40_000).catch(
            () => undefined,
          );
          if (res.destroyed) return;
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ created: 1, data: [{ b64_json: TINY_PNG_B64 }] }));
        },
      });
      const asked = upstream.nextRequest("images");
      const prompt = "made once while another replica waits";
      const id = await submitOk(a, { prompt, response_format: "url" });
      await asked;
      const logger = pino({ level: "info" }, { write: (line) => lines.push(JSON.parse(line)) });
      const b = await start({ logger });
      await dropLock(a);
      // The run says it goes on: its mark (its task and attempt) in the store.
      const marks = () => marksOf(prefix, id);
      await waitUntil(async () => (await marks()).length === 1, "the run's mark");
      const done = await waitForStatus(b, id, ["completed", "failed"], slow(60_000));
      expect(done.body.status, done.text).toBe("completed");
      expect(upstream.aborted).toBe(0);
      await Promise.all([expectOneGeneration(a, prompt), expectOneGeneration(b, prompt)]);
      // The other replica took the job and waited for the run, told once in its log.
      const waits = lines.filter((line) => line.msg === "task.rerun_waits");
      expect(waits).toMatchObject([{ task_id: id, attempt: 1, reason: "unleased_run" }]);
      expect(lines.filter((line) => line.msg === "task.rerun")).toHaveLength(0);
      // Gone with the run.
      expect(await marks()).toEqual([]);
    },
    slow(90_000),
  );

  it(
    "a stop while the lease is lapsed hands the task back at the grace's end: another replica runs it",
    async () => {
      const { prefix, upstream, start } = await useReplicas("unleased-stop", leaseSec(2));
      const a = await start();
      upstream.behave("images", { kind: "hang" });
      const asked = upstream.nextRequest("images");
      const id = await submitOk(a, { prompt: "handed back by a stop", response_format: "url" });
      await asked;
      const b = await start();
      await dropLock(a);
      await waitUntil(async () => (await marksOf(prefix, id)).length === 1, "the run's mark");
      upstream.behave("images", { kind: "ok", delayMs: 100 });
      // The test app's stop gives 500 ms; BullMQ's own hand-back no longer reaches the run, and
      // the stop waited 5 s more for a worker that did not close, then left the run behind.
      const stopStartedMs = Date.now();
      await a.close();
      expect(Date.now() - stopStartedMs).toBeLessThan(slow(3_000));
      const done = await waitForStatus(b, id, ["completed", "failed"], slow(20_000));
      expect(done.body.status, done.text).toBe("completed");
      expect(upstream.aborted).toBe(1);
      expect(await marksOf(prefix, id)).toEqual([]);
    },
    slow(60_000),
  );
});
