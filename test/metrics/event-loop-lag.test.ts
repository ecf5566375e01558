import { Registry } from "prom-client";
import { describe, expect, it, onTestFinished } from "vitest";
import { registerEventLoopLag } from "../../src/metrics/event-loop-lag.js";
import { startTestApp } from "../support/start-test-app.js";
import { slow } from "../support/time-factor.js";

/*
 * The event loop's delay, sampled every 100 ms and summed up per scrape (how much later than
 * the 100 ms each sample came, shown by the scrape that follows it): a
 * scrape that comes before the next sample (two Prometheus servers scraping
 * one replica, or a scrape right after another) gets the last summary again,
 * never an empty one (prom-client's exported a mean of NaN and a minimum of
 * 9.2e9 s then, which broke the dashboard's lag panel).
 */

const NAMES = ["min", "max", "mean", "stddev", "p50", "p90", "p99"].map(
  (part) => `image_task_sidecar_nodejs_eventloop_lag_${part}_seconds`,
);

/** The event-loop gauges of one scrape, by name. */
async function scrape(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    const [name, value] = line.split(" ");
    if (name?.startsWith("image_task_sidecar_nodejs_eventloop_lag")) {
      values.set(name, Number(value));
    }
  }
  return values;
}

describe("event-loop lag metrics", () => {
  it("keep the last summary when a scrape finds no new sample: never NaN, never 9.2e9 s", async () => {
    const app = await startTestApp({ defaultMetrics: true });
    onTestFinished(() => app.close());
    // Samples come every 100 ms: by then the window holds several.
    await new Promise((resolve) => setTimeout(resolve, 350));
    // Scrapes one after the other: most find no sample since the one before.
    const scrapes: Array<Map<string, number>> = [];
    for (let i = 0; i < 20; i += 1) scrapes.push(await scrape(app.url));
    await new Promise((resolve) => setTimeout(resolve, 350));
    scrapes.push(await scrape(app.url));
    for (const values of scrapes) {
      expect([...values.keys()].sort()).toEqual(
        [...NAMES, "image_task_sidecar_nodejs_eventloop_lag_seconds"].sort(),
      );
      for (const name of NAMES) {
        const value = values.get(name)!;
        expect(Number.isFinite(value), `${name} = ${value}`).toBe(true);
        expect(value, name).toBeGreaterThanOrEqual(0);
        expect(value, name).toBeLessThan(10);
      }
      expect(values.get(NAMES[0]!)!).toBeLessThanOrEqual(values.get(NAMES[1]!)!);
    }
  });

  it("read how late the loop ran, not the 100 ms between samples: about 0 idle, a stall at once", async () => {
    const app = await startTestApp({ defaultMetrics: true });
    onTestFinished(() => app.close());
    await new Promise((resolve) => setTimeout(resolve, 350));
    await scrape(app.url);
    // Idle: each sample came about on time (Node's own histogram held the 100 ms between them).
    await new Promise((resolve) => setTimeout(resolve, 650));
    const idle = await scrape(app.url);
    // Stretched on a loaded machine, never to the 100 ms the interval itself read as.
    const onTime = Math.min(slow(50), 90) / 1000;
    expect(idle.get("image_task_sidecar_nodejs_eventloop_lag_p50_seconds")).toBeLessThan(onTime);
    expect(idle.get("image_task_sidecar_nodejs_eventloop_lag_min_seconds")).toBeLessThan(onTime);
    // A stall of 500 ms (this process runs the app) right after that scrape: the sample due in
    // it came 400 to 500 ms late, and the next scrape shows it (Node's own histogram forgot its
    // last sample at each scrape, and with it such a stall).
    const until = performance.now() + 500;
    while (performance.now() < until) {
      // the event loop is blocked
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
    const stalled = await scrape(app.url);
    const max = stalled.get("image_task_sidecar_nodejs_eventloop_lag_max_seconds");
    expect(max).toBeGreaterThan(0.35);
    expect(max).toBeLessThan(slow(2_000) / 1000);
  });

  it("shows the loop's turn the scrape waited for in that scrape, not in the next one", async () => {
    const registry = new Registry();
    registerEventLoopLag(registry, "lag_test_");
    const lagOf = (text: string) =>
      Number(/^lag_test_nodejs_eventloop_lag_seconds (\S+)$/m.exec(text)?.[1]);
    // The scrape starts (every metric's read begins at once), then the rest of this turn of the
    // loop takes 300 ms: that is the lag the scrape waits out, and shows.
    const scraping = registry.metrics();
    const until = performance.now() + 300;
    while (performance.now() < until) {
      // the event loop is blocked
    }
    const stalled = lagOf(await scraping);
    expect(stalled).toBeGreaterThan(0.25);
    expect(stalled).toBeLessThan(slow(2_000) / 1000);
    // The next scrape, on an idle loop, shows its own short wait, not the stall again.
    const next = lagOf(await registry.metrics());
    expect(next).toBeLessThan(Math.min(slow(50), 200) / 1000);
  });
});
