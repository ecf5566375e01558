// Was the machine busy? The load average, and the CPU time other processes took while a
// phase ran: the machine's busy time (/proc/stat) less the bench's own and its children's
// (/proc/self/stat, children counted once they have exited, as they all have at a phase's
// end). Redis, shared with whatever else uses it, counts as another process.
import { readFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";

const round2 = (value) => Math.round(value * 100) / 100;

function read(file) {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return null;
  }
}

/** A reading to compare with a later one. */
export function snapshot() {
  const stat = read("/proc/stat");
  const self = read("/proc/self/stat");
  const at = { time: Date.now(), load: loadavg().map(round2) };
  if (!stat || !self) return at;
  const cpu = stat.split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal = 0] = cpu;
  const fields = self
    .slice(self.lastIndexOf(")") + 2)
    .split(" ")
    .map(Number);
  // utime, stime, cutime, cstime (fields 14 to 17 of the file; 11 to 14 after the name)
  const own = fields[11] + fields[12] + fields[13] + fields[14];
  return { ...at, busy: user + nice + system + irq + softirq, steal, own };
}

/**
 * What happened between two snapshots: the load averages at both ends, and the share of the
 * machine (all its cores) that other processes and the hypervisor (steal) took.
 */
export function between(before, after) {
  const result = { loadBefore: before.load, loadAfter: after.load };
  if (before.busy === undefined || after.busy === undefined) return result;
  const ticks = ((after.time - before.time) / 1000) * 100 * cpus().length;
  if (ticks <= 0) return result;
  const others = after.busy - before.busy - (after.own - before.own);
  result.othersPercent = Math.max(0, Math.round((others / ticks) * 1000) / 10);
  result.stealPercent = Math.round(((after.steal - before.steal) / ticks) * 1000) / 10;
  return result;
}

/** One line for the output: load before/after, other processes' share, steal. */
export function describeBusy(b) {
  if (!b) return "-";
  const parts = [`load ${b.loadBefore[0]} → ${b.loadAfter[0]}`];
  if (b.othersPercent !== undefined) parts.push(`others ${b.othersPercent} %`);
  if (b.stealPercent) parts.push(`steal ${b.stealPercent} %`);
  return parts.join(", ");
}

/** True when other processes took enough of the machine to disturb the figures. */
export const wasBusy = (b) =>
  (b?.othersPercent ?? 0) > 5 || (b?.stealPercent ?? 0) > 5 || (b?.loadBefore?.[0] ?? 0) > 0.5;
