import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

type RoundOrder = (targets: string[], round: number) => string[];

// A path in a variable: the bench is plain JavaScript without type declarations.
const MODULE = pathToFileURL(resolve(import.meta.dirname, "../../bench/lib/proxy-measure.mjs"));
const { roundOrder } = (await import(MODULE.href)) as { roundOrder: RoundOrder };

const C64 = [
  "direct",
  "pipe",
  "undici-pipe",
  "nginx",
  "service",
  "access-off",
  "traced",
  "baseline",
];

describe("the proxy phase's order of a round", () => {
  it("measures every target once a round", () => {
    for (let round = 0; round < 10; round += 1)
      expect([...roundOrder(C64, round)].sort()).toEqual([...C64].sort());
  });

  it("keeps the service and BASELINE next to each other, each first every other round", () => {
    const firsts = [];
    for (let round = 0; round < 8; round += 1) {
      const order = roundOrder(C64, round);
      const [s, b] = [order.indexOf("service"), order.indexOf("baseline")];
      expect(Math.abs(s - b), order.join(" ")).toBe(1);
      firsts.push(s < b ? "service" : "baseline");
    }
    expect(firsts).toEqual([
      "service",
      "baseline",
      "service",
      "baseline",
      "service",
      "baseline",
      "service",
      "baseline",
    ]);
  });

  it("gives the service and BASELINE the same places and predecessors", () => {
    // The old order (turned by one, nothing else) always put BASELINE after `traced` and the
    // service after `nginx`, and BASELINE later in the round than the service.
    const seen = { service: [] as string[], baseline: [] as string[] };
    const places = { service: 0, baseline: 0 };
    // Seven units (the pair is one), each first twice: 14 rounds see every case.
    for (let round = 0; round < 14; round += 1) {
      const order = roundOrder(C64, round);
      for (const role of ["service", "baseline"] as const) {
        const at = order.indexOf(role);
        places[role] += at;
        const before = order[at - 1] ?? "(first)";
        seen[role].push(before === "service" || before === "baseline" ? "(the other)" : before);
      }
    }
    expect(places.service).toBe(places.baseline);
    expect(seen.service.sort()).toEqual(seen.baseline.sort());
  });

  it("turns a load without BASELINE as before", () => {
    const targets = ["pipe", "undici-pipe", "service"];
    expect(roundOrder(targets, 0)).toEqual(targets);
    expect(roundOrder(targets, 1)).toEqual(["undici-pipe", "service", "pipe"]);
  });
});
