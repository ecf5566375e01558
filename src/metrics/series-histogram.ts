import { Histogram, type HistogramConfiguration } from "prom-client";
import { createSeriesLookup, type SeriesLookup } from "./series-lookup.js";

/** One series of a {@link SeriesHistogram}: an observation is a bucket scan and three adds. */
export class HistogramSeries {
  /** Observations per bucket (not cumulative), by the histogram's upper bounds. */
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Readonly<Record<string, string>>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = bounds.map(() => 0);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    const { bounds } = this;
    let i = 0;
    while (i < bounds.length && value > (bounds[i] as number)) i += 1;
    // Past the last bound: only in +Inf, which is the count.
    if (i < bounds.length) this.counts[i] = (this.counts[i] as number) + 1;
    this.sum += value;
    this.count += 1;
  }

  clear(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
}

/** A value of prom-client's exposition, as its own histogram makes them. */
interface ExportedValue {
  labels: Record<string, string | number>;
  sharedLabels: Readonly<Record<string, string>>;
  value: number;
  metricName: string;
  exemplar?: null;
}

interface Exported {
  values: ExportedValue[];
}

/** prom-client's own exposition of a histogram (not in its type declarations). */
const exposition = (Histogram.prototype as unknown as { getForPromString(): Promise<Exported> })
  .getForPromString;

/**
 * A prom-client histogram whose series are observed without prom-client's
 * per-observation work (a labels object converted, validated, joined into a
 * key and looked up, and a bucket looked up by its bound as a string): take
 * a series once with {@link series}, observe it per request. The scrape
 * exposes them as prom-client exposes its own series, beside any observed
 * the usual way.
 */
export class SeriesHistogram<N extends string> extends Histogram<N> {
  private readonly bounds: readonly number[];
  private readonly lookup: SeriesLookup<HistogramSeries>;

  constructor(config: HistogramConfiguration<N> & { labelNames: readonly N[]; buckets: number[] }) {
    super(config);
    this.bounds = [...config.buckets].sort((a, b) => a - b);
    this.lookup = createSeriesLookup(config.labelNames, (labels) => {
      return new HistogramSeries(labels, this.bounds);
    });
  }

  /** The series of these label values, in the order of the label names (bounded, as labels must be). */
  series(...values: string[]): HistogramSeries {
    return this.lookup.get(values);
  }

  /** What the registry exposes (prom-client's `Registry.getMetricsAsString` reads it). */
  async getForPromString(): Promise<Exported> {
    const data = await exposition.call(this);
    const name = (this as unknown as { name: string }).name;
    for (const series of this.lookup.all) {
      if (series.count > 0) data.values.push(...exportSeries(name, this.bounds, series));
    }
    return data;
  }

  override reset(): void {
    super.reset();
    // prom-client's constructor calls reset() before this class has its series.
    const lookup = this.lookup as SeriesLookup<HistogramSeries> | undefined;
    for (const series of lookup?.all ?? []) series.clear();
  }
}

function exportSeries(
  name: string,
  bounds: readonly number[],
  series: HistogramSeries,
): ExportedValue[] {
  const sharedLabels = series.labels;
  const bucket = `${name}_bucket`;
  let total = 0;
  const values: ExportedValue[] = bounds.map((le, i) => {
    total += series.counts[i] as number;
    return { labels: { le }, sharedLabels, value: total, metricName: bucket, exemplar: null };
  });
  values.push(
    {
      labels: { le: "+Inf" },
      sharedLabels,
      value: series.count,
      metricName: bucket,
      exemplar: null,
    },
    { labels: {}, sharedLabels, value: series.sum, metricName: `${name}_sum` },
    { labels: {}, sharedLabels, value: series.count, metricName: `${name}_count` },
  );
  return values;
}
