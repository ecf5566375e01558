import { describe, expect, it } from "vitest";
import { slow } from "../../support/time-factor.js";
import { STORES } from "../store-places.js";
import { call } from "../task-api.js";
import { openEvents, type SseStream } from "../sse-client.js";
import {
  chaosApp,
  each,
  expectEventsEnd,
  expectWell,
  outcome,
  SEED,
  storyOf,
} from "./chaos-checks.js";
import { isControl } from "./chaos-control.js";

/*
 * Background responses against a Responses channel that answers at random (see
 * chaos-channel.ts): refusals, plain answers, streams with any events, final ones without their
 * response or with odd outputs, two ends, none, junk nested 20,000 deep. Every response ends
 * (completed, incomplete, or failed with a code and a message) in OpenAI's shape, its stream ends
 * with its end (watched after its creation, or created and watched in one request), its channel
 * is called once, and nothing leaks or is logged as an error.
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
        const ends = await each(RESPONSES, story, async (n) => {
          const body = { model: "gpt-4o-mini", input: `chaos #${n} a haiku`, background: true };
          let id: string;
          let events: SseStream | undefined;
          if (n % 3 === 1) {
            // Created and watched in one request: the stream's first event names the response.
            events = await openEvents(app, "/v1/responses", { json: { ...body, stream: true } });
            const first = await events.event(0);
            id = String((first.json.response as { id?: string } | undefined)?.id);
          } else {
            const created = await call(app, "POST", "/v1/responses", { json: body });
            seen.push(created.text);
            expect(created.status, created.text).toBe(200);
            id = created.body.id;
            if (n % 3 === 0) events = await openEvents(app, `/v1/responses/${id}?stream=true`);
          }
          const answer = await outcome(app, `/v1/responses/${id}`, seen);
          // A response whose channel answered well completed, whatever the others' did.
          if (isControl(n)) expect(answer.body.status, story(n)).toBe("completed");
          if (events) await expectEventsEnd(events, `response.${answer.body.status}`);
          // A response object of OpenAI's shape, whatever the channel's was.
          const object = answer.body as unknown as { output?: unknown; id: string; status: string };
          expect(object.id, answer.text).toBe(id);
          if (object.status !== "failed")
            expect(Array.isArray(object.output), answer.text).toBe(true);
          // One channel, so one call: a response is never sent to a channel twice.
          const calls = channel.answers.filter((a) => a.task === n && a.route === "respond");
          expect(calls.length, answer.text.slice(0, 300)).toBeLessThanOrEqual(1);
          return { n, answer };
        });
        await expectWell(app, ends, seen, lines, story);
      },
    );
  },
);
