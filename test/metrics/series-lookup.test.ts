import { describe, expect, it } from "vitest";
import { createSeriesLookup } from "../../src/metrics/series-lookup.js";

/** Label values over a few names, drawn so that lookups repeat, alternate and change. */
function valuesAt(i: number): string[] {
  const route = ["/a", "/b", "/a/b"][(i * 7) % 3] as string;
  const model = ["m", "mm", "m m", ""][(i >> 1) % 4] as string;
  const kind = i % 2 === 0 ? "input" : "output";
  return [route, model, kind];
}

describe("createSeriesLookup", () => {
  it("finds, through its recent lookups, the series a plain map by label values finds", () => {
    const lookup = createSeriesLookup(["route", "model", "kind"], (labels) => ({ labels }));
    const reference = new Map<string, { labels: Record<string, string> }>();
    for (let i = 0; i < 2000; i += 1) {
      // A new array each time, with strings built anew: equal values, not the same objects.
      const values = valuesAt(i).map((value) => [...value].join(""));
      const series = lookup.get(values);
      const key = JSON.stringify(values);
      const known = reference.get(key);
      if (known) expect(series).toBe(known);
      else reference.set(key, series);
      expect(series.labels).toEqual({ route: values[0], model: values[1], kind: values[2] });
    }
    expect(lookup.all).toHaveLength(reference.size);
    expect(new Set(lookup.all).size).toBe(reference.size);
  });

  it("tells apart values a recent lookup shares but for one label", () => {
    const lookup = createSeriesLookup(["a", "b"], (labels) => labels);
    const first = lookup.get(["x", "input"]);
    const second = lookup.get(["x", "output"]);
    const third = lookup.get(["y", "output"]);
    expect(second).not.toBe(first);
    expect(third).not.toBe(second);
    expect(lookup.get(["x", "input"])).toBe(first);
    expect(lookup.get(["x", "output"])).toBe(second);
    expect(lookup.get(["y", "output"])).toBe(third);
    expect(lookup.all).toEqual([first, second, third]);
  });

  it("does not take a caller's array as its own: changing it later changes nothing", () => {
    const lookup = createSeriesLookup(["a"], (labels) => labels);
    const values = ["x"];
    const x = lookup.get(values);
    values[0] = "y";
    const y = lookup.get(values);
    expect(y).not.toBe(x);
    expect(y).toEqual({ a: "y" });
    expect(lookup.get(["x"])).toBe(x);
  });
});
