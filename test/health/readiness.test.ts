import { describe, expect, it } from "vitest";
import { createPartHealth } from "../../src/health/part-health.js";
import { readiness } from "../../src/health/readiness.js";
import { slow } from "../support/time-factor.js";

/*
 * What `/readyz` answers, from what the parts' checks last found: its JSON in
 * each state (ready, degraded, unavailable), that it never probes anything
 * itself, and how a part's health is kept (shared probes, a deadline, a
 * failure a real operation met checked again, never more often than the
 * retry interval).
 */

/**
 * A part whose probe does what `state.next` says (`hang once`: this probe hangs, the next
 * answers), counting its probes.
 */
function part(
  options: { initial?: string; retryMs?: number; confirmMissedDeadline?: boolean } = {},
) {
  const state = { next: "ok" as "ok" | "fail" | "hang" | "hang once", probes: 0 };
  const health = createPartHealth({
    probe: async () => {
      state.probes += 1;
      if (state.next === "fail") throw new Error("refused");
      if (state.next === "hang once") state.next = "ok";
      else if (state.next !== "hang") return;
      await new Promise(() => undefined);
    },
    reasonOf: () => "it refused",
    intervalMs: 60_000,
    retryMs: options.retryMs ?? 60_000,
    timeoutMs: 200,
    confirmMissedDeadline: options.confirmMissedDeadline ?? false,
    ...(options.initial ? { initial: options.initial } : {}),
  });
  return { state, health };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("/readyz", () => {
  it("is ready, then degraded (200) with the part's reason while a store is down, probing nothing itself", async () => {
    const store = part({ initial: "ok" });
    const images = part({ initial: "ok" });
    const deps = {
      store: store.health,
      images: images.health,
      channels: () => ({
        primary: "ok",
        backup: "answered 404 to GET /models; does baseUrl end in /v1?",
      }),
      isStopping: () => false,
    };
    expect(readiness(deps)).toEqual({
      status: 200,
      body: {
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

    // The periodic check finds the image store down: passthrough still works, so still 200.
    images.state.next = "fail";
    await images.health.refresh();
    expect(readiness(deps)).toEqual({
      status: 200,
      body: {
        status: "degraded",
        checks: { store: "ok", images: "it refused", channels: expect.any(Object) },
      },
    });
    store.state.next = "hang";
    await store.health.refresh();
    expect(readiness(deps)).toMatchObject({
      status: 200,
      body: {
        status: "degraded",
        checks: { store: "no answer within 0.2 s", images: "it refused" },
      },
    });
    const probes = store.state.probes + images.state.probes;
    for (let i = 0; i < 1000; i += 1) readiness(deps);
    expect(store.state.probes + images.state.probes).toBe(probes);
  });

  it("is unavailable (503) only while the service starts or shuts down, keeping its shape", () => {
    const store = part();
    const images = part();
    const deps = {
      store: store.health,
      images: images.health,
      channels: () => ({}),
      isStopping: () => false,
      isStarting: () => true,
    };
    expect(readiness(deps)).toEqual({
      status: 503,
      body: {
        status: "unavailable",
        reason: "the service is starting",
        checks: { store: "ok", images: "ok", channels: {} },
      },
    });
    expect(readiness({ ...deps, isStarting: () => false, isStopping: () => true })).toEqual({
      status: 503,
      body: {
        status: "unavailable",
        reason: "the service is shutting down",
        checks: { store: "ok", images: "ok", channels: {} },
      },
    });
    expect(store.state.probes + images.state.probes).toBe(0);
  });

  it("masks the credentials of any URL a reason quotes, and shows no other field", async () => {
    const store = createPartHealth({
      probe: () => Promise.reject(new Error("down")),
      reasonOf: () => "cannot reach redis://:hunter2-secret@10.0.0.5:6379/0?password=qwerty-12345",
      intervalMs: 60_000,
      retryMs: 60_000,
      timeoutMs: 200,
    });
    await store.refresh();
    const { body } = readiness({
      store,
      images: part().health,
      channels: () => ({ gw: "GET http://gw:3000/v1/models?api_key=sk-in-query-123 answered 500" }),
      isStopping: () => false,
    });
    const text = JSON.stringify(body);
    for (const secret of ["hunter2-secret", "qwerty-12345", "sk-in-query-123"]) {
      expect(text).not.toContain(secret);
    }
    expect(body.checks.store).toBe("cannot reach redis://:***@10.0.0.5:6379/0?password=***");
    expect(body.checks.channels.gw).toBe("GET http://gw:3000/v1/models?api_key=*** answered 500");
    expect(Object.keys(body).sort()).toEqual(["checks", "status"]);
  });
});

describe("a part's health", () => {
  it("shares a probe in flight, and checks a failure a real operation met at once", async () => {
    const { state, health } = part({ initial: "ok", retryMs: 100 });
    expect(health.available()).toBe(true);
    await Promise.all([health.refresh(), health.refresh(), health.refresh()]);
    expect(state.probes).toBe(1);

    // Probed a moment ago: the failure is checked once the retry interval has passed.
    await sleep(120);
    state.next = "fail";
    health.failed();
    await sleep(20);
    expect(health.current()).toBe("it refused");
    expect(health.available()).toBe(false);
    expect(state.probes).toBe(2);

    state.next = "ok";
    expect(await health.refresh()).toBe("ok");
    expect(health.available()).toBe(true);
  });

  it("with confirmMissedDeadline, counts a working part down only when a probe misses its deadline twice in a row, retryMs apart", async () => {
    const { state, health } = part({ initial: "ok", retryMs: 100, confirmMissedDeadline: true });
    let everDown = false;
    /** Until `done` holds (bounded), noting whether the part was ever unavailable meanwhile. */
    const watchUntil = async (done: () => boolean) => {
      for (const until = Date.now() + slow(5_000); !done() && Date.now() < until; await sleep(5)) {
        everDown ||= !health.available();
      }
      await sleep(5);
      everDown ||= !health.available();
    };
    health.start();
    try {
      // A miss, then an answer (a starved host, not a gone store): never down, probed again soon.
      state.next = "hang once";
      expect(await health.refresh()).toBe("ok");
      await watchUntil(() => state.probes === 2);
      expect(state.probes).toBe(2);
      expect(everDown).toBe(false);
      expect(health.current()).toBe("ok");

      // Two misses in a row: down, with the deadline as its reason.
      state.next = "hang";
      expect(await health.refresh()).toBe("ok");
      expect(health.available()).toBe(true);
      await watchUntil(() => health.current() !== "ok");
      expect(health.current()).toBe("no answer within 0.2 s");
      expect(state.probes).toBe(4);

      // A part that refuses counts as down at once; one already down is not given a second look.
      state.next = "ok";
      expect(await health.refresh()).toBe("ok");
      state.next = "fail";
      expect(await health.refresh()).toBe("it refused");
      state.next = "hang";
      expect(await health.refresh()).toBe("no answer within 0.2 s");
    } finally {
      health.stop();
    }
  });

  it("with confirmMissedDeadline, a part stopped while its miss awaits confirmation still probes on the next failure", async () => {
    const { state, health } = part({ initial: "ok", retryMs: 100, confirmMissedDeadline: true });
    health.start();
    try {
      state.next = "hang once";
      expect(await health.refresh()).toBe("ok");
      health.stop();
      health.start();
      state.next = "fail";
      await sleep(150);
      health.failed();
      for (const until = Date.now() + slow(5_000); health.available() && Date.now() < until;) {
        await sleep(5);
      }
      expect(health.current()).toBe("it refused");
      // Not started, nothing comes to confirm a miss: a working part counts it at once.
      health.stop();
      state.next = "ok";
      expect(await health.refresh()).toBe("ok");
      state.next = "hang";
      expect(await health.refresh()).toBe("no answer within 0.2 s");
    } finally {
      health.stop();
    }
  });

  it("probes no more often than the retry interval however many operations fail", async () => {
    const { state, health } = part({ initial: "ok", retryMs: 300 });
    health.start();
    try {
      state.next = "fail";
      const started = Date.now();
      while (Date.now() - started < 700) {
        health.failed();
        await sleep(5);
      }
      // One at once, then the part is known to fail and is probed every 300 ms: at most 3.
      expect(state.probes).toBeGreaterThanOrEqual(2);
      expect(state.probes).toBeLessThanOrEqual(4);
    } finally {
      health.stop();
    }
  });
});
