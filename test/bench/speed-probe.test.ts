import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it, onTestFinished } from "vitest";
import { isAlive } from "../support/process-alive.js";

interface SpeedSummary {
  roundMs: Array<number | null>;
  fastestMs: number;
  slowestMs: number;
  slowRounds: number[];
}
interface SpeedProbe {
  read(): Promise<number>;
  stop(): void;
}

// Paths in variables: the bench is plain JavaScript without type declarations.
const lib = (name: string) =>
  pathToFileURL(resolve(import.meta.dirname, `../../bench/lib/${name}`)).href;
const { speedNote, speedSummary, startSpeedProbe } = (await import(lib("speed-probe.mjs"))) as {
  speedNote(summary: SpeedSummary | null): string | null;
  speedSummary(probes: number[][]): SpeedSummary | null;
  startSpeedProbe(ctx: { group: string; options: object }): Promise<SpeedProbe>;
};
const { startedPids } = (await import(lib("children.mjs"))) as { startedPids: number[] };

/*
 * The proxy phase times a fixed loop on the core under test before each measurement: this VM
 * runs whole minutes a third slower without a trace in /proc/stat, and a round measured then
 * is named in the table's notes.
 */

describe("the bench's speed probe", () => {
  it("names the rounds whose readings ran 15 % or more slower than the fastest round's", () => {
    const summary = speedSummary([[10, 10.2], [12, 12.1, 11.9], [10.1], []]);
    expect(summary).toEqual({
      roundMs: [10.1, 12, 10.1, null],
      fastestMs: 10.1,
      slowestMs: 12,
      slowRounds: [2],
    });
    expect(speedNote(summary)).toMatch(
      /10\.1 \/ 12\.0 \/ 10\.1 \/ - ms.*round 2 ran 15 % or more slower/,
    );
    expect(speedNote(speedSummary([[10], [11]]))).toMatch(/no round ran 15 % slower/);
    expect(speedSummary([[], []])).toBeNull();
    expect(speedNote(null)).toBeNull();
  });

  it("reads the time of its loop from a child process, which ends with it", async () => {
    const probe = await startSpeedProbe({ group: "speed-probe-test", options: {} });
    onTestFinished(() => probe.stop());
    const readings = [await probe.read(), await probe.read()];
    for (const ms of readings) expect(ms).toBeGreaterThan(0);
    const pid = startedPids.at(-1)!;
    probe.stop();
    await expect.poll(() => isAlive(pid)).toBe(false);
  });
});
