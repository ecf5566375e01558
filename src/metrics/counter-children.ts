import type { Counter } from "prom-client";
import { createSeriesLookup } from "./series-lookup.js";

/** One series of a counter: counted here, added to the counter when it is read. */
export class CountedSeries<N extends string> {
  /** Counted since the last {@link CounterChildren.flush}. */
  pending = 0;
  constructor(readonly labels: Readonly<Record<N, string>>) {}

  inc(value = 1): void {
    this.pending += value;
  }
}

/**
 * The series of one counter by label values, for the per-request path.
 * prom-client hashes and validates the labels on every `inc`, its
 * `labels(...)` children too (they only bind the labels object); this
 * counts into a plain number per series and leaves that work to the
 * scrape, once per series: {@link flush} from the counter's `collect`.
 */
export interface CounterChildren<N extends string> {
  /** The series of these label values, in the order of the label names; made once. */
  get(...values: string[]): CountedSeries<N>;
  /** Adds what every series counted since the last flush to `counter`. */
  flush(counter: Counter<N>): void;
}

/** See {@link CounterChildren}. Label values must be bounded, as for the counter itself. */
export function createCounterChildren<N extends string>(
  labelNames: readonly N[],
): CounterChildren<N> {
  const lookup = createSeriesLookup(labelNames, (labels) => new CountedSeries(labels));
  return {
    get: (...values) => lookup.get(values),
    flush(counter) {
      for (const series of lookup.all) {
        if (series.pending === 0) continue;
        counter.inc(series.labels, series.pending);
        series.pending = 0;
      }
    },
  };
}
