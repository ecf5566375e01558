import { createHistogram, type RecordableHistogram } from "node:perf_hooks";
import { Gauge, type Registry } from "prom-client";

/**
 * prom-client's event-loop summary gauges: the part of the name after
 * `nodejs_eventloop_lag`, the help, and what each reads of the histogram (ns).
 */
const SUMMARY: ReadonlyArray<readonly [string, string, (h: RecordableHistogram) => number]> = [
  ["_min_seconds", "The minimum recorded event loop delay.", (h) => h.min],
  ["_max_seconds", "The maximum recorded event loop delay.", (h) => h.max],
  ["_mean_seconds", "The mean of the recorded event loop delays.", (h) => h.mean],
  ["_stddev_seconds", "The standard deviation of the recorded event loop delays.", (h) => h.stddev],
  [
    "_p50_seconds",
    "The 50th percentile of the recorded event loop delays.",
    (h) => h.percentile(50),
  ],
  [
    "_p90_seconds",
    "The 90th percentile of the recorded event loop delays.",
    (h) => h.percentile(90),
  ],
  [
    "_p99_seconds",
    "The 99th percentile of the recorded event loop delays.",
    (h) => h.percentile(99),
  ],
];

/**
 * Records, every `intervalMs`, how much later than its interval the loop ran
 * the timer (ns; 1 at least, the histogram's floor). Node's own
 * `monitorEventLoopDelay` records the whole time between samples (an idle
 * loop reads its interval as lag) and forgets its last sample on `reset()`
 * (a stall that began just after a scrape was never seen): this sampler
 * keeps its last tick across resets.
 */
function sampleEventLoop(intervalMs: number): RecordableHistogram {
  const histogram = createHistogram();
  const intervalNs = BigInt(intervalMs) * 1_000_000n;
  let last = process.hrtime.bigint();
  // Weakly held: the sampler ends with its registry (a test's apps come and go).
  const ref = new WeakRef(histogram);
  const timer = setInterval(() => {
    const held = ref.deref();
    if (!held) return clearInterval(timer);
    const now = process.hrtime.bigint();
    const late = now - last - intervalNs;
    last = now;
    held.record(late > 0n ? late : 1n);
  }, intervalMs).unref();
  return histogram;
}

/**
 * The event loop's delay, as prom-client's default metrics name and describe
 * it (`<prefix>nodejs_eventloop_lag_seconds` and its min, max, mean, stddev,
 * p50, p90 and p99 since the last scrape), sampled every `precisionMs`
 * (default 100): how much later than that each sample came, so an idle loop
 * reads about 0 (prom-client's read its own 10 ms interval as lag, and 100 ms
 * would read 100 ms), and a stall shows in the scrape after it, whenever it
 * began. Unlike prom-client's, a scrape that finds no sample since the one
 * before (two scrapers, or two scrapes within `precisionMs`) leaves the
 * summary as it was: prom-client's read an empty histogram then, and exported
 * a mean of NaN and a minimum of 9.2e9 s. `<prefix>nodejs_eventloop_lag_seconds`
 * itself is how long the scrape waited for the loop's next turn, shown by that
 * scrape (prom-client's showed it one scrape later). Replaces prom-client's
 * gauges of these names in `registry`.
 */
export function registerEventLoopLag(registry: Registry, prefix: string, precisionMs = 100): void {
  const base = `${prefix}nodejs_eventloop_lag`;
  registry.removeSingleMetric(`${base}_seconds`);
  for (const [suffix] of SUMMARY) registry.removeSingleMetric(`${base}${suffix}`);
  const histogram = sampleEventLoop(precisionMs);
  // Registered first, so a scrape runs its collect, which sets the summary, before it reads
  // the summary's gauges (registered after it, they would show the scrape before's values).
  const lag = new Gauge({
    name: `${base}_seconds`,
    help: "Lag of event loop in seconds.",
    registers: [registry],
    // One gauge's collect sets them all, as prom-client's does. The summary is set before the
    // first await: the registry starts every metric's read at once, and the summary's gauges
    // are read right after this one's start.
    async collect() {
      if (histogram.count > 0) {
        for (const { gauge, read } of summary) gauge.set(read(histogram) / 1e9);
        histogram.reset();
      }
      // How long this turn of the loop still runs: the scrape waits for it and shows it.
      // prom-client set it a turn later, so each scrape showed the scrape before's lag.
      const start = process.hrtime.bigint();
      await new Promise<void>((resolve) => setImmediate(resolve));
      lag.set(Number(process.hrtime.bigint() - start) / 1e9);
    },
  });
  const summary = SUMMARY.map(([suffix, help, read]) => ({
    gauge: new Gauge({ name: `${base}${suffix}`, help, registers: [registry] }),
    read,
  }));
}
