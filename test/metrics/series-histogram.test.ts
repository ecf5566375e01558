import { Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { SeriesHistogram } from "../../src/metrics/series-histogram.js";

/** The same observations through prom-client's own histogram and through series. */
function both(observations: [string, string, number][]) {
  const config = { help: "h", labelNames: ["route", "status"] as const, buckets: [0.1, 1, 10] };
  const plain = new Registry();
  const fast = new Registry();
  const reference = new Histogram({ ...config, name: "t_seconds", registers: [plain] });
  const series = new SeriesHistogram({ ...config, name: "t_seconds", registers: [fast] });
  for (const [route, status, value] of observations) {
    reference.observe({ route, status }, value);
    series.series(route, status).observe(value);
  }
  return { plain, fast, series };
}

describe("SeriesHistogram", () => {
  it("exposes what prom-client's histogram exposes for the same observations", async () => {
    const { plain, fast } = both([
      ["/a", "200", 0.05],
      ["/a", "200", 0.1],
      ["/a", "200", 0.5],
      ["/a", "500", 20],
      ["/b", "200", 10],
      ["/b", "200", 3],
    ]);
    expect(await fast.metrics()).toBe(await plain.metrics());
    expect(await fast.getMetricsAsJSON()).toEqual(await plain.getMetricsAsJSON());
  });

  it("starts over on reset, as prom-client's does", async () => {
    const { plain, fast, series } = both([["/a", "200", 0.5]]);
    series.reset();
    plain.resetMetrics();
    expect(await fast.metrics()).toBe(await plain.metrics());
    expect(await fast.metrics()).not.toContain("t_seconds_count");
  });
});
