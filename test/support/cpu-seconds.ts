import { readFileSync } from "node:fs";

/**
 * CPU seconds of this process and of the processes it started and reaped (the service's bins,
 * Redis servers, Chromium): Linux's /proc/self/stat, 0 elsewhere. What the test logs print.
 */
export function cpuSeconds(): number {
  try {
    const fields = (readFileSync("/proc/self/stat", "utf8").split(") ")[1] ?? "").split(" ");
    // utime, stime, cutime, cstime: fields 14 to 17 of stat(5), in clock ticks (100 a second).
    return fields.slice(11, 15).reduce((sum, ticks) => sum + Number(ticks), 0) / 100;
  } catch {
    return 0;
  }
}
