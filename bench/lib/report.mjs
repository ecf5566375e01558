// The run's figures: aligned tables on stdout, the same as markdown (to paste into the
// README) and as JSON, written to the results directory.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describeBusy, wasBusy } from "./busy.mjs";

function textTable({ title, columns, rows }) {
  const cells = [columns, ...rows].map((row) => row.map((cell) => String(cell ?? "-")));
  const widths = columns.map((_, i) => Math.max(...cells.map((row) => (row[i] ?? "").length)));
  const line = (row) =>
    row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join("  ");
  return [
    title,
    line(cells[0]),
    widths.map((w) => "-".repeat(w)).join("  "),
    ...cells.slice(1).map(line),
  ].join("\n");
}

function markdownTable({ title, columns, rows }) {
  const escape = (cell) => String(cell ?? "-").replaceAll("|", "\\|");
  return [
    `**${title}**`,
    "",
    `| ${columns.map(escape).join(" | ")} |`,
    `| ${columns.map((_, i) => (rows.every((row) => /^[-+\d]/.test(String(row[i] ?? "-"))) ? "---:" : "---")).join(" | ")} |`,
    ...rows.map((row) => `| ${row.map(escape).join(" | ")} |`),
  ].join("\n");
}

/** Every table of the run, in order: each phase's, then the targets. */
function tablesOf(result) {
  const tables = [];
  for (const [name, phase] of Object.entries(result.phases)) {
    const state =
      phase.status === "ok" ? "" : ` (${phase.status}${phase.error ? `: ${phase.error}` : ""})`;
    for (const table of phase.tables ?? [])
      tables.push({ ...table, title: `${table.title}${state}` });
    if (!phase.tables?.length) {
      tables.push({ title: `${name}${state}`, columns: ["figure"], rows: [["no figures"]] });
    }
    for (const note of phase.notes ?? [])
      tables.at(-1).notes = [...(tables.at(-1).notes ?? []), note];
  }
  const issue = result.targets.filter((t) => t.issue);
  const judged = issue.filter((t) => t.met === true || t.met === false);
  const met = judged.filter((t) => t.met).length;
  tables.push({
    title: "Targets (printed, never asserted)",
    columns: ["target", "measured", "ratio", "spread", "instructions", "met"],
    rows: result.targets.map((t) => [
      t.target,
      t.measured,
      t.ratio ?? "-",
      t.spread ?? "-",
      t.instructions ?? "-",
      verdict(t),
    ]),
    notes: [
      ...(issue.length
        ? [
            `Performance targets: ${met} met of ${judged.length} judged (${issue.length} lines; n/a: not measured, or not by this run's settings).`,
          ]
        : []),
      'ratio: median over rounds of the ratio taken round by round; spread: its min–max over rounds ("spread crosses": rounds fell on both sides of the limit); instructions: the same ratio in main-thread instructions per request (callgrind, chat at concurrency 1).',
    ],
  });
  return tables;
}

function verdict(t) {
  if (t.met === null || t.met === undefined) return "n/a";
  return `${t.met ? "met" : "not met"}${t.crosses ? " (spread crosses)" : ""}`;
}

/** The run's conditions: what it ran on, how, and whether the machine was busy. */
function header(result) {
  const { machine, date, durationSec, mode, rounds, roundSec, pinning, busy, baseline } =
    result.meta;
  const phases = Object.entries(result.phases)
    .map(([name, phase]) => `${name} ${describeBusy(phase.busy)}`)
    .join("; ");
  const busyRun = wasBusy(busy) || Object.values(result.phases).some((p) => wasBusy(p.busy));
  return [
    `${date} - Node ${machine.node}, ${machine.cpuModel} x${machine.cpuCount}, ${mode ?? "full"} run ` +
      `(${rounds} rounds of ${roundSec} s) in ${Math.round(durationSec)} s.`,
    `Pinning: ${pinning?.pinned ? pinning.reason : `none (${pinning?.reason ?? "not tried"})`}.` +
      (baseline
        ? ` BASELINE: ${baseline}${result.meta.control ? " (--control: the run's own build)" : ""}.`
        : "") +
      (result.meta.profile
        ? ` CPU profiles of ${result.meta.profile} (its figures inflated).`
        : "") +
      (result.meta.perf ? ` perf records of ${result.meta.perf} (its figures inflated).` : ""),
    `Machine: ${describeBusy(busy)} over the run (load average at start → end; others: CPU taken by other processes, Redis's included); per phase: ${phases}.` +
      (busyRun ? " BUSY: other processes ran; figures are noisier than on a quiet machine." : ""),
    machine.note,
  ].join("\n");
}

export function renderText(result) {
  return [
    header(result),
    ...tablesOf(result).map(
      (table) =>
        textTable(table) +
        (table.notes ? `\n${table.notes.map((n) => `  note: ${n}`).join("\n")}` : ""),
    ),
  ].join("\n\n");
}

export function renderMarkdown(result) {
  return (
    [
      header(result)
        .split("\n")
        .map((line) => `_${line}_`)
        .join("\n\n"),
      ...tablesOf(result).map(
        (table) =>
          markdownTable(table) +
          (table.notes ? `\n\n${table.notes.map((n) => `- ${n}`).join("\n")}` : ""),
      ),
    ].join("\n\n") + "\n"
  );
}

/**
 * Formats with the project's prettier when it is there, so that results pass `npm run lint`.
 * The settings are the project's wherever the results go (`--out /tmp/...` finds none there,
 * and prettier's defaults would then fail the lint once the files are copied in).
 */
async function pretty(text, file) {
  try {
    const prettier = await import("prettier");
    const settings = await prettier.resolveConfig(fileURLToPath(import.meta.url));
    return await prettier.format(text, { ...settings, filepath: file });
  } catch {
    return text;
  }
}

/** Writes `bench-<date>.json` (kept out of git: only `latest.*` are committed), `latest.json` and `latest.md`; resolves the JSON's path. */
export async function writeResults(dir, result) {
  await mkdir(dir, { recursive: true });
  const stamp = result.meta.date.replace(/[:.]/g, "-");
  const file = join(dir, `bench-${stamp}.json`);
  const json = await pretty(JSON.stringify(result, null, 2), file);
  await writeFile(file, json);
  await writeFile(join(dir, "latest.json"), json);
  await writeFile(
    join(dir, "latest.md"),
    await pretty(renderMarkdown(result), join(dir, "latest.md")),
  );
  return file;
}
