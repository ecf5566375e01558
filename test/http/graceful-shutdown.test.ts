import { afterEach, describe, expect, it } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, type TestApp } from "../support/start-test-app.js";

let upstream: FakeUpstream | undefined;
let app: TestApp | undefined;
afterEach(async () => {
  await app?.close();
  await upstream?.close();
});

describe("stopping (SIGTERM)", () => {
  it("lets a request in flight finish within the grace period, then refuses new ones", async () => {
    upstream = await startFakeUpstream();
    // Longer than the 5 s a former version cut connections after, whatever the grace.
    upstream.behave("images", { kind: "ok", delayMs: 5500 });
    app = await startTestApp({ upstream });
    const inFlight = fetch(`${app.baseURL}/images/generations`, {
      method: "POST",
      headers: { authorization: `Bearer ${app.key}` },
      body: JSON.stringify({ model: "gpt-image-1", prompt: "slow" }),
    });
    await upstream.nextRequest("images");

    const stopped = app.server.close(10_000);
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect(((await answer.json()) as { data: unknown[] }).data).toHaveLength(1);
    await stopped;
    await expect(fetch(`${app.url}/healthz`)).rejects.toThrow();
  });
});
