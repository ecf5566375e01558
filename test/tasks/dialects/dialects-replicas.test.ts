import { leaseSec } from "../../support/time-factor.js";
import type { ServerResponse } from "node:http";
import { createClient } from "@keyv/redis";
import { afterAll, describe, expect, it, onTestFinished } from "vitest";
import { startFakeUpstream } from "../../support/fake-upstream.js";
import { REDIS_URL, deleteKeys, listKeys, uniquePrefix } from "../../support/redis.js";
import { PNG_B64 } from "../replicas/replica-cluster.js";
import { openEvents } from "../sse-client.js";
import { useApp } from "../task-api.js";
import {
  bifrostUntil,
  dialectCall,
  expectPngBase64,
  pollBifrost,
  pollSub2api,
  sub2apiUntil,
  submitBifrostOk,
  submitSub2apiOk,
  type Sub2apiBody,
} from "./dialect-api.js";

/*
 * Two replicas of one deployment on Redis (apps in this process on one key
 * prefix, each with its own bus): a task submitted in a dialect on one is
 * polled, waited for, watched and cancelled on the other, in its dialect; a
 * job's own retention reaches the store's expiry.
 */

const upstream = await startFakeUpstream();
afterAll(() => upstream.close());

async function replicas() {
  const prefix = uniquePrefix("dialects");
  onTestFinished(() => deleteKeys(prefix).then(() => undefined));
  const options = { upstream, redis: { prefix }, imageTasks: { leaseSec: leaseSec(2) } };
  return { prefix, a: await useApp(options), b: await useApp(options) };
}

/** Images answered when `gate` opens; a prompt `never` is never answered. */
function gatedImages(): () => void {
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  upstream.behave("images", {
    kind: "custom",
    async respond(_req, res: ServerResponse, body) {
      const { prompt } = body as { prompt?: string };
      await (prompt === "never" ? new Promise(() => undefined) : gate);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ created: 1, data: [{ b64_json: PNG_B64 }] }));
    },
  });
  return open;
}

describe("the async dialects across replicas on Redis", () => {
  it("a sub2api task submitted on A is watched, waited for and cancelled on B, in sub2api's shape", async () => {
    const open = gatedImages();
    const { a, b } = await replicas();
    const held = await submitSub2apiOk(a, { prompt: "held" });
    const doomed = await submitSub2apiOk(a, { prompt: "never" });
    await sub2apiUntil(b, held, ["processing"]);
    const watched = await openEvents(b, `/v1/images/tasks/${held}/events`);
    expect((await watched.event(0)).json).toMatchObject({
      id: held,
      object: "image.generation.task",
      status: "processing",
    });
    const waiting = dialectCall<Sub2apiBody>(b, "GET", `/v1/images/tasks/${held}?wait=10`);
    open();
    const waited = await waiting;
    expect(waited.body).toMatchObject({ id: held, status: "completed", http_status: 200 });
    expectPngBase64(waited.body.result?.data[0]?.b64_json);
    await watched.ended;
    expect(watched.events.at(-1)!.event).toBe("image.task.completed");
    expect(watched.events.at(-1)!.json).toEqual(waited.body);

    await sub2apiUntil(b, doomed, ["processing"]);
    const cancelled = await dialectCall<Sub2apiBody>(
      b,
      "POST",
      `/v1/images/tasks/${doomed}/cancel`,
    );
    expect(cancelled.body).toMatchObject({ status: "failed", http_status: 499 });
    expect((await pollSub2api(a, doomed)).body).toEqual(cancelled.body);
  });

  it("a Bifrost job submitted on B is polled on A; its own TTL is the store's", async () => {
    gatedImages()();
    const { prefix, a, b } = await replicas();
    const id = await submitBifrostOk(
      b,
      { prompt: "job" },
      {
        headers: { "x-bf-async-job-result-ttl": "30" },
      },
    );
    const done = await bifrostUntil(a, id, ["completed"]);
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ id, status: "completed", status_code: 200 });
    expect((await pollBifrost(b, id)).body).toEqual(done.body);

    // The record expires with the job's result: 30 s, not imageTasks.retentionSec.
    const key = (await listKeys(prefix)).find((name) => name.endsWith(`task:${id}`));
    expect(key).toBeDefined();
    const client = createClient({ url: REDIS_URL });
    await client.connect();
    try {
      const ttlMs = await client.pTTL(key!);
      expect(ttlMs).toBeGreaterThan(0);
      expect(ttlMs).toBeLessThanOrEqual(31_000);
    } finally {
      await client.close();
    }
  });
});
