import { monitorEventLoopDelay, type IntervalHistogram } from "node:perf_hooks";
import { Gauge, type Registry } from "prom-client";

/**
 * prom-client's event-loop summary gauges: the part of the name after
 * `nodejs_eventloop_lag`, the help, and what each reads of the histogram (ns),
 * given the sampling interval (ns). Node's histogram records the whole time
 * between two samples, so an idle loop reads the interval itself: each
 * reading but the spread has it taken off, and says how late the loop ran.
 */
const SUMMARY: ReadonlyArray<
  readonly [string, string, (h: IntervalHistogram, intervalNs: number) => number]
> = [
  ["_min_seconds", "The minimum recorded event loop delay.", (h, i) => late(h.min, i)],
  ["_max_seconds", "The maximum recorded event loop delay.", (h, i) => late(h.max, i)],
  ["_mean_seconds", "The mean of the recorded event loop delays.", (h, i) => late(h.mean, i)],
  ["_stddev_seconds", "The standard deviation of the recorded event loop delays.", (h) => h.stddev],
  [
    "_p50_seconds",
    "The 50th percentile of the recorded event loop delays.",
    (h, i) => late(h.percentile(50), i),
  ],
  [
    "_p90_seconds",
    "The 90th percentile of the recorded event loop delays.",
    (h, i) => late(h.percentile(90), i),
  ],
  [
    "_p99_seconds",
    "The 99th percentile of the recorded event loop delays.",
    (h, i) => late(h.percentile(99), i),
  ],
];

/** How much later than its interval a sample came (ns), never below 0. */
function late(sampleNs: number, intervalNs: number): number {
  return Math.max(0, sampleNs - intervalNs);
}

/**
 * The event loop's delay, as prom-client's default metrics name and describe
 * it (`<prefix>nodejs_eventloop_lag_seconds` and its min, max, mean, stddev,
 * p50, p90 and p99 since the last scrape), sampled every `precisionMs`
 * (default 100): how much later than that each sample came, so an idle loop
 * reads about 0 (prom-client's read its own 10 ms interval as lag, and 100 ms
 * would read 100 ms). Unlike prom-client's, a scrape that finds no sample since the
 * one before (two scrapers, or two scrapes within `precisionMs`) leaves the
 * summary as it was: prom-client's read an empty histogram then, and exported
 * a mean of NaN and a minimum of 9.2e9 s. Replaces prom-client's gauges of
 * these names in `registry`.
 */
export function registerEventLoopLag(registry: Registry, prefix: string, precisionMs = 100): void {
  const base = `${prefix}nodejs_eventloop_lag`;
  registry.removeSingleMetric(`${base}_seconds`);
  for (const [suffix] of SUMMARY) registry.removeSingleMetric(`${base}${suffix}`);
  const histogram = monitorEventLoopDelay({ resolution: precisionMs });
  const intervalNs = precisionMs * 1e6;
  histogram.enable();
  // Registered first, so a scrape runs its collect, which sets the summary, before it reads
  // the summary's gauges (registered after it, they would show the scrape before's values).
  const lag = new Gauge({
    name: `${base}_seconds`,
    help: "Lag of event loop in seconds.",
    registers: [registry],
    // One gauge's collect sets them all, as prom-client's does.
    collect() {
      const start = process.hrtime.bigint();
      setImmediate(() => lag.set(Number(process.hrtime.bigint() - start) / 1e9));
      if (histogram.count === 0) return;
      for (const { gauge, read } of summary) gauge.set(read(histogram, intervalNs) / 1e9);
      histogram.reset();
    },
  });
  const summary = SUMMARY.map(([suffix, help, read]) => ({
    gauge: new Gauge({ name: `${base}${suffix}`, help, registers: [registry] }),
    read,
  }));
}
