/** Series of one metric by label values, made once each (see {@link createSeriesLookup}). */
export interface SeriesLookup<S> {
  /** The series of these label values, in the order of the label names; made on first use. */
  get(values: readonly string[]): S;
  /** Every series made so far. */
  readonly all: readonly S[];
}

/**
 * Finds a metric's series by its label values without building a key: one
 * map level per label name, the last one holding the series. prom-client
 * joins and hashes the labels on every observation, which costs more than
 * the rest of a metric update on the per-request path.
 */
export function createSeriesLookup<N extends string, S>(
  labelNames: readonly N[],
  make: (labels: Readonly<Record<N, string>>) => S,
): SeriesLookup<S> {
  const root = new Map<string, unknown>();
  const all: S[] = [];
  const last = labelNames.length - 1;
  return {
    all,
    get(values) {
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
      let series = level.get(value) as S | undefined;
      if (series === undefined) {
        const labels = {} as Record<N, string>;
        labelNames.forEach((name, i) => (labels[name] = values[i] as string));
        series = make(labels);
        level.set(value, series);
        all.push(series);
      }
      return series;
    },
  };
}
