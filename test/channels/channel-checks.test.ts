import { slow } from "../support/time-factor.js";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startS3Server, type TestS3Server } from "../support/s3-server.js";
import { runToExit, serve, writeConfig } from "../support/serve-process.js";
import { freePort } from "../support/redis.js";
import { waitUntil } from "../tasks/task-api.js";

/*
 * A channel whose baseUrl lacks `/v1` (new-api's most common mistake), as an
 * operator meets it: a gateway that serves the OpenAI routes under /v1 only
 * and answers 404 (plain text, as Go's router does) anywhere else. Start-up
 * says so with the hint, /readyz reports it, a request is never told the
 * gateway "could not be reached", and `check-config --probe` finds it.
 */

const GATEWAY_KEY = "sk-gateway-user";
const OWN_KEY = "sk-own-key";
const FORWARD_SECRET = randomBytes(48).toString("base64");

let dir: string;
let gateway: Server;
let origin: string;
let s3: TestS3Server;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "channel-checks-"));
  s3 = await startS3Server();
  gateway = createServer((req, res) => {
    if (req.url === "/v1/models") {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ object: "list", data: [{ id: "gpt-4o-mini", object: "model" }] }));
      return;
    }
    if (req.url === "/v1/chat/completions") {
      req.resume();
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ id: "c", object: "chat.completion", choices: [] }));
      return;
    }
    req.resume();
    res.writeHead(404, { "content-type": "text/plain" }).end("404 page not found");
  });
  await new Promise<void>((resolve) => gateway.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => gateway?.close(resolve));
  await s3?.close();
  await rm(dir, { recursive: true, force: true });
});

/** A service in front of the gateway, in forward mode, the channel's baseUrl as given. */
const config = (baseUrl: string, more: Record<string, unknown> = {}) => ({
  server: { port: 0, host: "127.0.0.1" },
  store: { url: "memory://" },
  auth: {
    keys: [{ key: OWN_KEY, group: "all" }],
    forward: { channel: "gw", secret: FORWARD_SECRET },
  },
  groups: { all: { models: ["*"] } },
  channels: [{ name: "gw", baseUrl, apiKey: "sk-channel", models: ["*"] }],
  ...more,
});

/** Runs the bin with `args`; resolves its exit code and output. */
function runCli(args: string[]) {
  return runToExit(args, { cwd: dir });
}

describe("a channel whose baseUrl lacks /v1", () => {
  it("is named at start-up with the hint, reported on /readyz, and never called unreachable", async () => {
    const file = await writeConfig(dir, "no-v1", config(origin));
    const served = await serve(file, dir, { LOG_LEVEL: "warn" });
    const hint = `channels[0].baseUrl: GET ${origin}/models answered 404; does baseUrl end in /v1? (channel \\"gw\\")`;
    await waitUntil(() => served.stdout().includes(hint), "the start-up warning");

    const ready = await fetch(`${served.url}/readyz`);
    // A channel alone never makes the service unready: it is reported.
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({
      status: "ready",
      checks: {
        store: "ok",
        images: "ok",
        channels: { gw: "answered 404 to GET /models; does baseUrl end in /v1?" },
      },
    });

    // A configured key through the channel: the gateway's 404 is said as such.
    const chat = await fetch(`${served.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${OWN_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
    });
    const chatText = await chat.text();
    expect(chatText).toContain("answered HTTP 404");
    expect(chatText).not.toContain("could not be reached");

    // A gateway key in forward mode: checked at GET /models, which answers 404.
    const models = await fetch(`${served.url}/v1/models`, {
      headers: { authorization: `Bearer ${GATEWAY_KEY}` },
    });
    expect(models.status).toBe(502);
    const body = (await models.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("upstream_unavailable");
    expect(body.error.message).toBe(
      "The gateway that checks this API key answered HTTP 404 to its model list request.",
    );
    await waitUntil(
      () => served.stdout().includes("does its baseUrl end in /v1?"),
      "the forward check's warning",
    );
    served.child.kill("SIGTERM");
    await served.exited;
  });

  it("is fine with /v1: no warning, ok on /readyz", async () => {
    const file = await writeConfig(dir, "with-v1", config(`${origin}/v1`));
    const served = await serve(file, dir, { LOG_LEVEL: "warn" });
    await waitUntil(async () => {
      const body = (await (await fetch(`${served.url}/readyz`)).json()) as {
        checks: { channels: Record<string, string> };
      };
      return body.checks.channels.gw === "ok";
    }, "the channel's check");
    expect(served.stdout()).not.toContain("channels[0]");
    served.child.kill("SIGTERM");
    await served.exited;
  });
});

describe("image-task-sidecar check-config --probe", () => {
  it(
    "runs start-up's checks, one line each, and exits 1 when one fails",
    async () => {
      const closed = `http://127.0.0.1:${await freePort()}`;
      const file = await writeConfig(
        dir,
        "probe-bad",
        config(origin, {
          channels: [
            { name: "gw", baseUrl: origin, models: ["*"] },
            { name: "gone", baseUrl: `${closed}/v1`, models: ["gpt-4o"] },
            { name: "demo", type: "demo", models: ["gpt-image-1"] },
            // The demo lists gpt-image-1, not this one: a model routed to a channel that lacks it.
            { name: "demo-2", type: "demo", models: ["gpt-image-1", "gpt-image-9", "dall-*"] },
          ],
          images: {
            ...s3.imagesConfig("probe"),
            url: "s3://no-such-bucket/probe",
          },
        }),
      );
      const result = await runCli(["check-config", "--probe", "--config", file]);
      expect(result.code, result.stderr).toBe(1);
      const lines = result.stdout.split("\n").filter((line) => /^(ok|failed) /.test(line));
      expect(lines).toEqual([
        `failed  channels[0].baseUrl: GET ${origin}/models answered 404; does baseUrl end in /v1? (channel "gw")`,
        `failed  channels[1].baseUrl: GET ${closed}/v1/models could not be reached (ECONNREFUSED) (channel "gone")`,
        'ok      channels[2] "demo" (the built-in demo): GET /models answered 200 with a model list',
        `failed  channels[3].models: gpt-image-9 is not in the channel's model list (channel "demo-2")`,
        "ok      store.url: memory:// (this process)",
        `failed  images.url: the bucket does not exist (NoSuchBucket, on PutObject, s3://no-such-bucket/probe at ${s3.endpoint})`,
      ]);
    },
    slow(30_000),
  );

  it(
    "exits 0 when everything answers",
    async () => {
      const file = await writeConfig(
        dir,
        "probe-good",
        config(`${origin}/v1`, {
          store: { url: `sqlite://${join(dir, "probe", "tasks.db")}` },
          images: s3.imagesConfig("probe"),
        }),
      );
      const result = await runCli(["check-config", "--probe", "--config", file]);
      expect(result.code, result.stdout + result.stderr).toBe(0);
      expect(result.stdout.split("\n").filter((line) => /^(ok|failed) /.test(line))).toEqual([
        'ok      channels[0] "gw": GET /models answered 200 with a model list',
        `ok      store.url: sqlite://${join(dir, "probe", "tasks.db")} (not made yet; its folder can be written)`,
        `ok      images.url: s3://${s3.bucket}/probe at ${s3.endpoint}: HeadBucket, then an object written, read back and deleted`,
      ]);
    },
    slow(30_000),
  );
});
