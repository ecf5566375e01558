import { describe, expect, it } from "vitest";
import { webhooksSchema } from "../../src/config/config-schema.js";
import {
  ATTEMPT_OUTCOMES,
  nextStep,
  outcomeOfStatus,
  retryDelaySec,
} from "../../src/webhooks/delivery-policy.js";

const DEFAULTS = webhooksSchema.parse({});

describe("the default schedule", () => {
  it("makes 8 attempts in all, waiting 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h", () => {
    const waits: number[] = [];
    for (let attempt = 1; ; attempt += 1) {
      const next = nextStep("http_error", attempt, DEFAULTS);
      if (next.action === "done") {
        expect(next.result).toBe("exhausted");
        expect(attempt).toBe(8);
        break;
      }
      waits.push(next.delayMs / 1000);
    }
    expect(waits).toEqual([5, 300, 1800, 7200, 18000, 36000, 36000]);
    expect(waits.reduce((a, b) => a + b) / 3600).toBeCloseTo(27.58, 1);
  });
});

describe("retryDelaySec", () => {
  it("repeats the last wait when the schedule is shorter than maxAttempts - 1", () => {
    const policy = { maxAttempts: 6, retryScheduleSec: [10, 60] };
    const waits = [1, 2, 3, 4, 5].map((attempt) => nextStep("timeout", attempt, policy));
    expect(waits).toEqual([
      { action: "retry", delayMs: 10_000 },
      { action: "retry", delayMs: 60_000 },
      { action: "retry", delayMs: 60_000 },
      { action: "retry", delayMs: 60_000 },
      { action: "retry", delayMs: 60_000 },
    ]);
    expect(nextStep("timeout", 6, policy)).toEqual({ action: "done", result: "exhausted" });
  });

  it("leaves the entries past maxAttempts - 1 unused", () => {
    const policy = { maxAttempts: 2, retryScheduleSec: [1, 2, 3] };
    expect(nextStep("network_error", 1, policy)).toEqual({ action: "retry", delayMs: 1000 });
    expect(nextStep("network_error", 2, policy)).toEqual({ action: "done", result: "exhausted" });
  });

  it("is the wait after attempt n, as BullMQ's attemptsMade counts", () => {
    expect([1, 2, 3, 7, 8, 50].map((n) => retryDelaySec(n, DEFAULTS.retryScheduleSec))).toEqual([
      5, 300, 1800, 36000, 36000, 36000,
    ]);
  });
});

describe("nextStep", () => {
  it("ends on delivered and refused at any attempt; retries everything else", () => {
    const policy = { maxAttempts: 3, retryScheduleSec: [1] };
    for (const outcome of ATTEMPT_OUTCOMES) {
      const next = nextStep(outcome, 1, policy);
      if (outcome === "delivered") expect(next).toEqual({ action: "done", result: "delivered" });
      else if (outcome === "refused") expect(next).toEqual({ action: "done", result: "refused" });
      else expect(next, outcome).toEqual({ action: "retry", delayMs: 1000 });
    }
    expect(nextStep("delivered", 3, policy)).toEqual({ action: "done", result: "delivered" });
  });

  it("with maxAttempts 1 never retries", () => {
    expect(nextStep("http_error", 1, { maxAttempts: 1, retryScheduleSec: [5] })).toEqual({
      action: "done",
      result: "exhausted",
    });
  });
});

describe("outcomeOfStatus", () => {
  it("2xx delivers, 3xx is a redirect, anything else an http error", () => {
    expect([200, 201, 204, 299].map(outcomeOfStatus)).toEqual(Array(4).fill("delivered"));
    expect([301, 302, 307, 308, 304].map(outcomeOfStatus)).toEqual(Array(5).fill("redirect"));
    expect([400, 404, 408, 410, 429, 500, 502, 503].map(outcomeOfStatus)).toEqual(
      Array(8).fill("http_error"),
    );
  });
});
