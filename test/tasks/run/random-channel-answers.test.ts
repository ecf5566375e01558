import { describe, it } from "vitest";
import { slow } from "../../support/time-factor.js";
import { STORES } from "../store-places.js";
import { chaosApp, each, expectWell, SEED, storyOf } from "./chaos-checks.js";
import { runChaosTask, startReceiver, WEBHOOK_SECRET } from "./chaos-tasks.js";

/*
 * Tasks against channels that answer at random (see chaos-channel.ts): held calls on two
 * channels, jobs on sub2api, Bifrost and OpenAI background channels, streamed and not, edits
 * and generations. Whatever the channels do, every task ends (completed with an image that is
 * one, or failed with a code and a message) within its timeout, no generation a channel
 * answered whole is asked for again, clients read no 5xx and nothing secret, the service logs
 * no error and still answers. Some are cancelled or deleted mid-run; once a task ended, its
 * channels hear nothing more of it, and its webhook comes once, signed (see chaos-tasks.ts).
 * Seeded: `TEST_RANDOM_SEED` runs another mix.
 */

const TASKS = 48;

describe.each(STORES)("random channel answers: image tasks, on the $name store", ({ options }) => {
  it(`every task ends, once (seed ${SEED})`, { timeout: slow(90_000) }, async () => {
    const hooks = await startReceiver();
    const { channel, app, lines } = await chaosApp(await options(), {
      webhooks: { secret: WEBHOOK_SECRET, allowPrivateNetworks: true },
    });
    const story = (n: number) => storyOf(channel.answers, n);
    const seen: string[] = [];
    const places = { here: app, there: app };
    const ends = await each(TASKS, story, (n) => runChaosTask(n, places, channel, hooks, seen));
    await expectWell(app, ends, seen, lines, story);
  });
});
