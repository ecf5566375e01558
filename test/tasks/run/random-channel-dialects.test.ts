import { describe, it } from "vitest";
import { slow } from "../../support/time-factor.js";
import { STORES } from "../store-places.js";
import { chaosApp, each, expectWell, SEED, storyOf } from "./chaos-checks.js";
import { runDialectTask } from "./chaos-dialects.js";

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
        const places = { here: app, there: app };
        const ends = await each(DIALECT_TASKS, story, (n) =>
          runDialectTask(n, places, story, seen),
        );
        await expectWell(app, ends, seen, lines, story);
      },
    );
  },
);
