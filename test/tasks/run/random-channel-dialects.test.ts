import { describe, expect, it } from "vitest";
import { slow } from "../../support/time-factor.js";
import { STORES } from "../store-places.js";
import { call, type TaskJson } from "../task-api.js";
import { chaosApp, each, expectWell, MODELS, SEED, storyOf, TIMEOUT_SEC } from "./chaos-checks.js";
import { isControl } from "./chaos-control.js";

/*
 * Tasks submitted and polled through sub2api's and Bifrost's routes, against channels that
 * answer at random (see chaos-channel.ts): every answer in each dialect's shape (sub2api's
 * always 200, Bifrost's 202 until the job ended), every task ended, a failure's message there.
 */

/** Tasks submitted and polled through sub2api's and Bifrost's routes. */
const DIALECT_TASKS = 24;

describe.each(STORES)(
  "random channel answers: sub2api and Bifrost, on the $name store",
  ({ options }) => {
    it(
      `every task ends in sub2api's and Bifrost's views too (seed ${SEED})`,
      { timeout: slow(90_000) },
      async () => {
        const { channel, app, lines } = await chaosApp(await options());
        const story = (n: number) => storyOf(channel.answers, n);
        const seen: string[] = [];
        const ends = await each(DIALECT_TASKS, story, async (n) => {
          const sub2api = n % 2 === 0;
          const model = MODELS[n % MODELS.length]!;
          const submitted = await call(
            app,
            "POST",
            sub2api ? "/v1/images/generations/async" : "/v1/async/images/generations",
            {
              json: { model, prompt: `chaos #${n} a lighthouse`, response_format: "url" },
            },
          );
          seen.push(submitted.text);
          expect(submitted.status, submitted.text).toBe(202);
          const path = sub2api
            ? `/v1/images/tasks/${submitted.body.id}`
            : `/v1/async/images/generations/${submitted.body.id}`;
          const deadline = Date.now() + slow((TIMEOUT_SEC + 15) * 1000);
          for (;;) {
            const answer = await call(app, "GET", path);
            seen.push(answer.text);
            const ended = answer.body.status === "completed" || answer.body.status === "failed";
            // sub2api answers 200 whatever the status; Bifrost 202 until the job ended.
            expect(answer.status, answer.text).toBe(sub2api || ended ? 200 : 202);
            if (ended) {
              // A task whose channel answered well completed, whatever the others' did.
              if (isControl(n)) expect(answer.body.status, story(n)).toBe("completed");
              // Bifrost's error wraps the OpenAI one (`error.error`); the checks read that.
              const inner = (answer.body.error as { error?: TaskJson["error"] } | undefined)?.error;
              return {
                n,
                answer: sub2api ? answer : { ...answer, body: { ...answer.body, error: inner } },
              };
            }
            if (Date.now() > deadline) throw new Error(`${path} still ${answer.body.status}`);
            await new Promise((resolve) => setTimeout(resolve, 250));
          }
        });
        await expectWell(app, ends, seen, lines, story);
      },
    );
  },
);
