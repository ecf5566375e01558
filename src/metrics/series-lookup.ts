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
  // The last two lookups' label values and series: a request's series are nearly always the
  // ones the request before it used (same route, model, channel; two when it counts input and
  // output tokens), and comparing a few strings costs less than a map lookup per label.
  const recent = [
    { values: [] as string[], series: undefined as S | undefined },
    { values: [] as string[], series: undefined as S | undefined },
  ];
  let older = 0;

  function find(values: readonly string[]): S {
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
  }

  return {
    all,
    get(values) {
      for (let r = 0; r < 2; r += 1) {
        const hit = recent[r] as (typeof recent)[number];
        if (hit.series !== undefined && sameValues(values, hit.values, last)) return hit.series;
      }
      const series = find(values);
      const slot = recent[older] as (typeof recent)[number];
      for (let i = 0; i <= last; i += 1) slot.values[i] = values[i] as string;
      slot.series = series;
      older = 1 - older;
      return series;
    },
  };
}

/** Whether the label values `values` are those of `previous` (indices 0 to `last`). */
function sameValues(values: readonly string[], previous: readonly string[], last: number): boolean {
  for (let i = last; i >= 0; i -= 1) if (values[i] !== previous[i]) return false;
  return true;
}
