import { describe, it } from "vitest";
import { slow } from "../../support/time-factor.js";
import { STORES } from "../store-places.js";
import { chaosApp, each, expectWell, SEED, storyOf } from "./chaos-checks.js";
import { runChaosResponse } from "./chaos-tasks.js";

/*
 * Background responses against a Responses channel that answers at random (see
 * chaos-channel.ts): refusals, plain answers, streams with any events, final ones without their
 * response or with odd outputs, two ends, none, junk nested 20,000 deep. Every response ends
 * (completed, incomplete, or failed with a code and a message) in OpenAI's shape, its stream ends
 * with its end (watched after its creation, or created and watched in one request), its channel
 * is called once, and nothing leaks or is logged as an error (see chaos-tasks.ts).
 */

/** Background responses, on a channel of their own. */
const RESPONSES = 24;

describe.each(STORES)(
  "random channel answers: background responses, on the $name store",
  ({ options }) => {
    it(
      `every background response ends, once (seed ${SEED})`,
      { timeout: slow(90_000) },
      async () => {
        const { channel, app, lines } = await chaosApp(await options());
        const story = (n: number) => storyOf(channel.answers, n);
        const seen: string[] = [];
        const places = { here: app, there: app };
        const ends = await each(RESPONSES, story, (n) =>
          runChaosResponse(n, places, channel, seen),
        );
        await expectWell(app, ends, seen, lines, story);
      },
    );
  },
);
