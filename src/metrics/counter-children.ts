import type { Counter } from "prom-client";

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
  /** Nested by label value, one level per label name but the last, whose map holds series. */
  const root = new Map<string, unknown>();
  const all: CountedSeries<N>[] = [];
  const last = labelNames.length - 1;
  return {
    get(...values) {
      let level = root;
      for (let i = 0; i < last; i += 1) {
        const value = values[i] as string;
        let next = level.get(value) as Map<string, unknown> | undefined;
        if (!next) {
          next = new Map();
          level.set(value, next);
        }
        level = next;
      }
      const value = values[last] as string;
      let series = level.get(value) as CountedSeries<N> | undefined;
      if (!series) {
        const labels = {} as Record<N, string>;
        labelNames.forEach((name, i) => (labels[name] = values[i] as string));
        series = new CountedSeries(labels);
        level.set(value, series);
        all.push(series);
      }
      return series;
    },
    flush(counter) {
      for (const series of all) {
        if (series.pending === 0) continue;
        counter.inc(series.labels, series.pending);
        series.pending = 0;
      }
    },
  };
}
