// The service against BASELINE, per load: measured in turn (next to each other in every round)
// and at the same time (both loaded at once, sharing the core under test). In a control run
// (BASELINE a build of the same commit, `--control`) both should be near 1.00x: the figure to
// judge a change by is the one taken at the same time.
import { fmtRatio, fmtSpread, spread } from "./stats.mjs";

const ratios = (pairs, field) =>
  spread(pairs.map(({ service, baseline }) => service[field] / baseline[field]));

/**
 * The ratios of the service to BASELINE in CPU per request and RPS, median over rounds with
 * their spread: `inTurn` from the rounds' separate measurements, `together` from the
 * measurements at the same time; null without BASELINE.
 */
export function baselineFigures(got) {
  const { service = [], baseline = [], together = [] } = got;
  const n = Math.min(service.length, baseline.length);
  if (n === 0) return null;
  const inTurn = Array.from({ length: n }, (_, i) => ({
    service: service[i],
    baseline: baseline[i],
  }));
  return {
    inTurn: { cpu: ratios(inTurn, "cpuUs"), rps: ratios(inTurn, "rps") },
    together: together.length
      ? {
          cpu: ratios(together, "cpuUs"),
          rps: ratios(together, "rps"),
          cpuUs: {
            service: spread(together.map((pair) => pair.service.cpuUs)),
            baseline: spread(together.map((pair) => pair.baseline.cpuUs)),
          },
          samples: together,
        }
      : null,
  };
}

/** The table of {@link baselineFigures} over the loads (`{label, vsBaseline}`), or null. */
export function baselineTable(loads) {
  const rows = loads
    .filter((load) => load.vsBaseline)
    .map(({ label, vsBaseline: { inTurn, together } }) => {
      const cell = (s) => fmtSpread(s, fmtRatio);
      return [
        label,
        cell(together?.cpu),
        cell(together?.rps),
        together ? fmtSpread(together.cpuUs.service) : "-",
        together ? fmtSpread(together.cpuUs.baseline) : "-",
        cell(inTurn.cpu),
        cell(inTurn.rps),
      ];
    });
  if (rows.length === 0) return null;
  return {
    title: "Proxy: the service against BASELINE (service / BASELINE)",
    columns: [
      "load",
      "CPU, at the same time",
      "RPS, at the same time",
      "service CPU µs/req",
      "BASELINE CPU µs/req",
      "CPU, in turn",
      "RPS, in turn",
    ],
    rows,
    notes: [
      "At the same time: each round also loads the service and BASELINE at once, twice (each load generator started first once), each with the load's concurrency, both on the core under test; median over those measurements; their ratio does not move with the machine's other load, which the ratio in turn (separate measurements in the same round) does. A control run (--control: BASELINE is the run's own build) reads 1.00x within the spread; judge a change by the ratio at the same time. Its CPU µs/req are those of the shared core, not comparable with the table above.",
    ],
  };
}
