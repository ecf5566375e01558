// What the figures were measured on.
import { cpus, loadavg, totalmem } from "node:os";

export function describeMachine() {
  const cores = cpus();
  return {
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    cpuModel: cores[0]?.model?.trim() ?? "unknown",
    cpuCount: cores.length,
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    loadAverageAtStart: loadavg().map((value) => Math.round(value * 100) / 100),
    note:
      "The load generator, the fake channel, the pipe and the service run on the same machine " +
      "and share its cores; absolute figures move from run to run, ratios and CPU per request hold better.",
  };
}
