import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SignJWT } from "jose";
import { describe, expect, it, onTestFinished } from "vitest";
import { startFakeGateway } from "../support/fake-gateway.js";
import { startPrivateRedis, uniquePrefix } from "../support/redis.js";
import { S3_CREDENTIALS, startS3Server } from "../support/s3-server.js";
import { serve, writeConfig } from "../support/serve-process.js";
import { startWebhookReceiver } from "../webhooks/webhook-receiver.js";

/**
 * Secrets in every place the configuration has one (some through `${VAR}`), then the real
 * CLI in its own process at debug level, driven through every path that uses one; nothing it
 * writes to stdout or stderr may hold any of them. Every value `secret()` makes is searched
 * for, so a new place only needs a `secret()` in the config below.
 */
describe("secrets from the config and the environment", () => {
  it("never reach stdout or stderr, at trace level, through passthrough, tasks, webhooks, forward checks and JWTs", async () => {
    const secrets = new Set<string>();
    const run = randomBytes(4).toString("hex");
    const secret = (label: string) => {
      const value = `s3cr3t-${label}-${run}-${randomBytes(8).toString("hex")}`;
      secrets.add(value);
      return value;
    };
    const dir = await mkdtemp(join(tmpdir(), "secrets-"));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));

    const redisPassword = secret("redis");
    const redis = await startPrivateRedis({ password: redisPassword });
    onTestFinished(() => redis.close());
    const channelKey = secret("channel");
    const alice = secret("gateway-user");
    const gw = await startFakeGateway({
      [channelKey]: ["gpt-4o-mini", "gpt-image-1"],
      [alice]: ["gpt-4o-mini"],
    });
    onTestFinished(() => gw.close());
    const receiver = await startWebhookReceiver();
    onTestFinished(() => receiver.close());

    const key = secret("key");
    const jwtSecret = secret("jwt");
    const metricsToken = secret("metrics");
    const webhookSecret = `whsec_${randomBytes(32).toString("base64")}`;
    secrets.add(webhookSecret);
    const basicPassword = secret("basic-password");
    const env = {
      SIDECAR_REDIS_URL: redis.url,
      GATEWAY_CHANNEL_KEY: channelKey,
      FORWARD_SECRET: secret("forward"),
      LOG_LEVEL: "trace",
    };
    const config: Record<string, unknown> = {
      server: {
        port: 0,
        host: "127.0.0.1",
        urlSigningSecret: secret("signing"),
        shutdownGraceSec: 2,
      },
      store: { url: "${SIDECAR_REDIS_URL}", prefix: uniquePrefix("secrets") },
      auth: {
        keys: [{ key, group: "default" }],
        jwt: { secret: jwtSecret },
        forward: { channel: "gateway", secret: "${FORWARD_SECRET}" },
      },
      groups: { default: { models: ["*"] } },
      channels: [
        { name: "gateway", baseUrl: gw.baseUrl, apiKey: "${GATEWAY_CHANNEL_KEY}", models: ["*"] },
        // Credentials in a channel's URL, and a glob: its model list is fetched (and fails).
        {
          name: "basic",
          baseUrl: gw.baseUrl.replace("http://", `http://user:${basicPassword}@`),
          apiKey: secret("basic-key"),
          models: ["other-*"],
        },
      ],
      imageTasks: { timeoutSec: 5, pollIntervalSec: 1 },
      webhooks: { secret: webhookSecret, allowPrivateNetworks: true, timeoutSec: 5 },
      metrics: { bearerToken: metricsToken },
      logging: { level: "debug" },
    };
    // The image store's credentials: a real S3 server (s3rver takes only its own key pair).
    const s3 = await startS3Server(`bucket-${run}`);
    onTestFinished(() => s3.close());
    for (const value of Object.values(S3_CREDENTIALS)) secrets.add(value);
    config.images = {
      url: `s3://${s3.bucket}/images`,
      s3: { endpoint: s3.endpoint, forcePathStyle: true, ...S3_CREDENTIALS },
    };

    const file = await writeConfig(dir, "secrets", config);
    const served = await serve(file, dir, env);
    const url = served.url;
    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
    const json = (token: string) => ({ ...bearer(token), "content-type": "application/json" });

    // Passthrough: the model list (both channels, one failing), a chat.
    expect((await fetch(`${url}/v1/models`, { headers: bearer(key) })).status).toBe(200);
    const chat = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: json(key),
      body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(chat.status).toBe(200);
    // Forward mode: a gateway key, and one the gateway refuses.
    expect((await fetch(`${url}/v1/models`, { headers: bearer(alice) })).status).toBe(200);
    expect((await fetch(`${url}/v1/models`, { headers: bearer(secret("unknown")) })).status).toBe(
      401,
    );
    // A JWT, and one signed with another secret.
    const jwt = async (signing: string) => {
      const token = await new SignJWT({ group: "default" })
        .setProtectedHeader({ alg: "HS256" })
        .setSubject("user-1")
        .setExpirationTime("5m")
        .sign(new TextEncoder().encode(signing));
      // Neither the token nor its signature may be written.
      secrets.add(token);
      secrets.add(token.split(".")[2]!);
      return token;
    };
    expect(
      (await fetch(`${url}/v1/models`, { headers: bearer(await jwt(jwtSecret)) })).status,
    ).toBe(200);
    expect(
      (await fetch(`${url}/v1/models`, { headers: bearer(await jwt(secret("other-jwt"))) })).status,
    ).toBe(401);
    // A task with a webhook, its image by its signed URL.
    const submitted = await fetch(`${url}/v1/images/tasks`, {
      method: "POST",
      headers: json(key),
      body: JSON.stringify({
        model: "gpt-image-1",
        // A prompt is the user's: never in a log line either.
        prompt: `a lighthouse ${secret("prompt")}`,
        response_format: "url",
        webhook_url: `${receiver.url}/hook`,
      }),
    });
    expect(submitted.status).toBe(202);
    const { id } = (await submitted.json()) as { id: string };
    let task: { status: string; data?: Array<{ url: string }> } = { status: "queued" };
    for (let i = 0; i < 100 && !["completed", "failed"].includes(task.status); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      task = (await (
        await fetch(`${url}/v1/images/tasks/${id}`, { headers: bearer(key) })
      ).json()) as typeof task;
    }
    expect(task.status).toBe("completed");
    const image = await fetch(task.data![0]!.url);
    expect(image.status).toBe(200);
    // Nor the image: a piece of its bytes as base64, anywhere.
    const imageB64 = Buffer.from(await image.arrayBuffer()).toString("base64");
    const middle = Math.floor(imageB64.length / 2);
    secrets.add(imageB64.length < 64 ? imageB64 : imageB64.slice(middle - 16, middle + 16));
    await receiver.received(1);
    // Metrics with its token, and with another.
    expect((await fetch(`${url}/metrics`, { headers: bearer(metricsToken) })).status).toBe(200);
    expect((await fetch(`${url}/metrics`, { headers: bearer(secret("not-metrics")) })).status).toBe(
      401,
    );

    served.child.kill("SIGTERM");
    expect(await served.exited).toBe(0);
    const printed = `${served.stdout()}\n${served.stderr()}`;

    // Every request has its access line, the task its lines.
    const lines = served
      .stdout()
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as { msg?: string });
    expect(lines.filter((line) => line.msg === "request").length).toBeGreaterThanOrEqual(10);
    for (const msg of ["task.submitted", "task.started", "task.completed", "webhook.delivered"]) {
      expect(
        lines.some((line) => line.msg === msg),
        msg,
      ).toBe(true);
    }
    // The paths ran and logged (debug lines, the failed model list), the banner masked the URL.
    expect(printed).toContain("forward key accepted by the gateway");
    expect(printed).toContain("could not list the channel's models");
    // stdout is no terminal: the banner is the `started` line, its store masked.
    expect(lines.find((line) => line.msg === "started")).toMatchObject({
      store: expect.stringMatching(/^redis:\/\/:\*\*\*@127\.0\.0\.1:\d+/),
    });
    for (const value of secrets) {
      expect(printed, `a secret was printed: ${value}`).not.toContain(value);
      expect(printed).not.toContain(encodeURIComponent(value));
    }
    expect(printed).not.toContain(`s3cr3t-`);
  });
});
