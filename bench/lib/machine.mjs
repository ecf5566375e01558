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
      "The load generator, the fake channel and the processes under test share one machine " +
      "(on cores of their own when pinned); absolute figures move from run to run, ratios taken " +
      "in the same rounds hold better, and instruction counts best.",
  };
}
