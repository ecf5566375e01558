import { appendFileSync } from "node:fs";
import { afterAll, beforeAll, expect } from "vitest";
import { cpuSeconds } from "./cpu-seconds.js";

/*
 * TEST_CPU_LOG=FILE appends a line per in-process test file: the CPU its worker spent on it and
 * its time. A worker runs one file at a time, so its CPU between the file's first and last hook
 * is the file's (timers a file left running count for the next). CI's two cores are its limit:
 * the files that cost most CPU are where a shorter run starts. The multi-process files have the
 * slot log instead (process-slots.ts).
 */
const LOG = process.env.TEST_CPU_LOG;

let cpuAtStart = 0;
let startedAt = 0;

if (LOG) {
  beforeAll(() => {
    cpuAtStart = cpuSeconds();
    startedAt = Date.now();
  });
  afterAll(() => {
    const file = expect.getState().testPath ?? "?";
    const cpu = (cpuSeconds() - cpuAtStart).toFixed(1);
    appendFileSync(
      LOG,
      `${cpu} CPU-s, ${Math.round((Date.now() - startedAt) / 1000)} s: ${file}\n`,
    );
  });
}
