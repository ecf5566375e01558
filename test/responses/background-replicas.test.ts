import { leaseSec } from "../support/time-factor.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream } from "../support/fake-upstream.js";
import { REDIS_URL, deleteKeys, uniquePrefix } from "../support/redis.js";
import { serve, writeConfig } from "../support/serve-process.js";
import { TEST_KEYS, UPSTREAM_KEY } from "../support/start-test-app.js";
import { readEvents, retrieveUntil, sdk, targetOf } from "./response-helpers.js";
import { scriptChannel } from "./scripted-channel.js";

/*
 * Two service processes (the built bin, `npm run build`) on the real Redis, as
 * replicas behind a load balancer: a background response's stream cut on one
 * resumes on the other, while the response runs and after it ended.
 */

/** A deployment of the service on Redis in front of a scripted channel that holds its streams. */
async function deployment() {
  const dir = await mkdtemp(join(tmpdir(), "responses-replicas-"));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  const upstream = await startFakeUpstream();
  onTestFinished(() => upstream.close());
  const channel = scriptChannel(upstream, { hold: true });
  onTestFinished(() => channel.release());
  const prefix = uniquePrefix("responses");
  onTestFinished(async () => {
    await deleteKeys(prefix);
  });
  const config = await writeConfig(dir, prefix, {
    server: { port: 0, host: "127.0.0.1", shutdownGraceSec: 2 },
    store: { url: REDIS_URL, prefix },
    auth: { keys: [{ key: TEST_KEYS.default, group: "default" }] },
    groups: { default: { models: ["gpt-4o-mini"] } },
    channels: [
      { name: "fake", baseUrl: upstream.baseUrl, apiKey: UPSTREAM_KEY, models: ["gpt-4o-mini"] },
    ],
    imageTasks: { maxConcurrent: 2, leaseSec: leaseSec(1), pollIntervalSec: 1 },
    images: { url: `file://${join(dir, "images")}` },
  });
  return { channel, start: () => serve(config, dir) };
}

describe("background responses across replicas", () => {
  it("resumes a stream cut on one replica on the other, while it runs and after it ended", async () => {
    const { channel, start } = await deployment();
    const [first, second] = await Promise.all([start(), start()]);
    const one = sdk(targetOf(first!.url, TEST_KEYS.default));
    const other = sdk(targetOf(second!.url, TEST_KEYS.default));

    const head = await readEvents(
      await one.responses.create({
        model: "gpt-4o-mini",
        input: "across replicas",
        background: true,
        stream: true,
      }),
      (event) => event.type === "response.output_text.delta",
    );
    const id = (head[0] as { response: { id: string } }).response.id;
    expect(head.map((event) => event.sequence_number)).toEqual([0, 1, 2, 3, 4, 5]);

    // Resumed on the other replica after event 2, while the channel holds the rest.
    const resumed = await other.responses.retrieve(id, { stream: true, starting_after: 2 });
    setTimeout(() => channel.release(), 500);
    const rest = await readEvents(resumed);
    expect(rest.map((event) => event.sequence_number)).toEqual(
      Array.from({ length: rest.length }, (_, i) => 3 + i),
    );
    expect(rest.slice(0, 3).map((event) => event.type)).toEqual([
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
    ]);
    expect(rest.at(-1)).toMatchObject({ type: "response.completed", response: { id } });
    const text = [...head.slice(0, 3), ...rest]
      .filter((event) => event.type === "response.output_text.delta")
      .map((event) => (event as { delta: string }).delta)
      .join("");
    expect(text).toBe("Hello from the scripted channel!");

    // After its end: any replica, from any point.
    const last = rest.at(-1)!.sequence_number;
    const tail = await readEvents(
      await one.responses.retrieve(id, { stream: true, starting_after: last - 2 }),
    );
    expect(tail.map((event) => event.sequence_number)).toEqual([last - 1, last]);
    const done = await retrieveUntil(other, id, ["completed"]);
    expect(done.output_text).toBe("Hello from the scripted channel!");
    expect((await one.responses.retrieve(id)).output_text).toBe(done.output_text);
    expect(channel.calls).toBe(1);
    expect(channel.aborted).toBe(0);
  });

  it("never sends a response twice: one whose replica died mid-run fails interrupted on another", async () => {
    const { channel, start } = await deployment();
    const doomed = await start();
    const started = channel.nextStarted();
    const created = await sdk(targetOf(doomed.url, TEST_KEYS.default)).responses.create({
      model: "gpt-4o-mini",
      input: "half done when its replica dies",
      background: true,
    });
    await started;
    const survivor = await start();
    doomed.child.kill("SIGKILL");
    const client = sdk(targetOf(survivor.url, TEST_KEYS.default));
    const ended = await retrieveUntil(client, created.id, ["failed", "completed"], 60_000);
    expect(ended.status).toBe("failed");
    expect(ended.error?.code).toBe("server_error");
    expect(ended.error?.message).toMatch(/not sent to a channel again/);
    // The channel got it once: the dead replica's call, never a second one.
    expect(channel.calls).toBe(1);
  });
});
