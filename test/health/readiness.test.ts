import { describe, expect, it } from "vitest";
import { createPartHealth } from "../../src/health/part-health.js";
import { readiness } from "../../src/health/readiness.js";

/*
 * What `/readyz` answers, from the parts' checks: its JSON in each state, and
 * how a part's health is kept (shared probes, a deadline, a failure reported
 * by a real operation checked again at once).
 */

/** A part whose probe does what `state.next` says, counting its probes. */
function part(initial?: string) {
  const state = { next: "ok" as "ok" | "fail" | "hang", probes: 0 };
  const health = createPartHealth({
    probe: async () => {
      state.probes += 1;
      if (state.next === "fail") throw new Error("refused");
      if (state.next === "hang") await new Promise(() => undefined);
    },
    reasonOf: () => "it refused",
    intervalMs: 60_000,
    retryMs: 60_000,
    timeoutMs: 200,
    ...(initial ? { initial } : {}),
  });
  return { state, health };
}

describe("/readyz", () => {
  it("is ready with every part's reason, channels reported but never fatal, room for more fields", async () => {
    const store = part();
    const images = part();
    const deps = {
      store: store.health,
      images: images.health,
      channels: () => ({
        primary: "ok",
        backup: "answered 404 to GET /models; does baseUrl end in /v1?",
      }),
      isStopping: () => false,
      details: () => ({ redis: { primary: "10.0.0.5:6379" } }),
    };
    expect(await readiness(deps)).toEqual({
      status: 200,
      body: {
        redis: { primary: "10.0.0.5:6379" },
        status: "ready",
        checks: {
          store: "ok",
          images: "ok",
          channels: {
            primary: "ok",
            backup: "answered 404 to GET /models; does baseUrl end in /v1?",
          },
        },
      },
    });

    images.state.next = "fail";
    expect(await readiness(deps)).toMatchObject({
      status: 503,
      body: {
        status: "unavailable",
        reason: "the image store is unavailable",
        checks: { store: "ok", images: "it refused" },
      },
    });
    store.state.next = "hang";
    expect(await readiness(deps)).toMatchObject({
      status: 503,
      body: {
        reason: "the task store is unavailable",
        checks: { store: "no answer within 0.2 s", images: "it refused" },
      },
    });
  });

  it("says the service is shutting down, keeping its shape, without probing", async () => {
    const store = part();
    const images = part();
    const answer = await readiness({
      store: store.health,
      images: images.health,
      channels: () => ({}),
      isStopping: () => true,
    });
    expect(answer).toEqual({
      status: 503,
      body: {
        status: "unavailable",
        reason: "the service is shutting down",
        checks: { store: "ok", images: "ok", channels: {} },
      },
    });
    expect(store.state.probes + images.state.probes).toBe(0);
  });
});

describe("a part's health", () => {
  it("shares a probe in flight, and checks again at once when a real operation failed", async () => {
    const { state, health } = part("ok");
    expect(health.available()).toBe(true);
    await Promise.all([health.refresh(), health.refresh(), health.refresh()]);
    expect(state.probes).toBe(1);

    state.next = "fail";
    health.failed();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(health.current()).toBe("it refused");
    expect(health.available()).toBe(false);

    state.next = "ok";
    expect(await health.refresh()).toBe("ok");
    expect(health.available()).toBe(true);
  });
});
