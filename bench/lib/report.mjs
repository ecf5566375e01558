// The run's figures: aligned tables on stdout, the same as markdown (to paste into the
// README) and as JSON, written to the results directory.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

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
  tables.push({
    title: "Targets (printed, never asserted)",
    columns: ["target", "measured", "met"],
    rows: result.targets.map((t) => [
      t.target,
      t.measured,
      t.met === null ? "n/a" : t.met ? "met" : "not met",
    ]),
  });
  return tables;
}

function header(result) {
  const { machine, date, durationSec, quick } = result.meta;
  return (
    `${date} - Node ${machine.node}, ${machine.cpuModel} x${machine.cpuCount}, ` +
    `${quick ? "quick run" : "full run"} in ${Math.round(durationSec)} s. ${machine.note}`
  );
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
      `_${header(result)}_`,
      ...tablesOf(result).map(
        (table) =>
          markdownTable(table) +
          (table.notes ? `\n\n${table.notes.map((n) => `- ${n}`).join("\n")}` : ""),
      ),
    ].join("\n\n") + "\n"
  );
}

/** Formats with the project's prettier when it is there, so that results pass `npm run lint`. */
async function pretty(text, file) {
  try {
    const prettier = await import("prettier");
    return await prettier.format(text, { ...(await prettier.resolveConfig(file)), filepath: file });
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
