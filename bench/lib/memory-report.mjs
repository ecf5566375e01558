// The memory phase's tables: throughput per setup (medians over rounds with their spread) and
// the RSS of finished tasks held.
import { freshSpreads } from "./fresh-start.mjs";
import { HOLD, TMPFS_SETUP } from "./real-size.mjs";
import { fmt, fmtRatio, fmtSpread, spread } from "./stats.mjs";

/** Round-by-round ratios of `field` between two setups' samples (the rounds both have). */
function paired(list, reference, field) {
  if (!list?.length || !reference?.length) return null;
  const n = Math.min(list.length, reference.length);
  return spread(Array.from({ length: n }, (_, i) => list[i][field] / reference[i][field]));
}

/** Medians and spreads of a setup's throughput rounds, onto its figures. */
function throughputFigures(figures, tmpfs) {
  const of = (field) => spread(figures.samples.map((sample) => sample[field]));
  figures.submissionsPerSec = of("submissionsPerSec");
  figures.completionsPerSec = of("completionsPerSec");
  figures.cpuMsPerTask = of("cpuMsPerTask");
  figures.completionsVsTmpfs = paired(figures.samples, tmpfs?.samples, "completionsPerSec");
  figures.cpuVsTmpfs = paired(figures.samples, tmpfs?.samples, "cpuMsPerTask");
}

const mark = (text, suffix, when) => (when ? `${text} ${suffix}` : text);

function holdRow(setup, x) {
  return [
    setup.label,
    fmt(x.held),
    fmt(x.rssBeforeMiB, 1),
    fmt(x.rssBurstMiB, 1),
    x.rssHeld
      ? mark(
          fmtSpread(x.rssHeld, (v) => fmt(v, 1)),
          "(some expired)",
          x.allHeld === false,
        )
      : "-",
    fmt(x.heapPerTaskKiB, 2),
    fmtSpread(x.rssEstimated, (v) => fmt(v, 1)),
    x.rssAfterExpiryMiB === undefined
      ? "-"
      : mark(fmt(x.rssAfterExpiryMiB, 1), "(not expired in time)", x.expired === false),
    setup.images === "file" ? `${fmt(x.imageFilesHeld)} / ${fmt(x.imageFilesAfterExpiry)}` : "-",
  ];
}

export function summarize(out, setups) {
  const f = (setup) => out.figures.setups[setup.key] ?? {};
  const tmpfs = out.figures.setups[TMPFS_SETUP];
  for (const setup of setups) if (f(setup).samples?.length) throughputFigures(f(setup), tmpfs);
  const { rounds, tasksPerRound, tasks } = out.figures;
  const redis = (setup, value) => (setup.store === "redis" ? value : "-");
  out.tables = [
    {
      title: `Real-size images: throughput and task-store weight (${fmt(rounds)} rounds of ${fmt(tasksPerRound)} url tasks)`,
      columns: [
        "task store, images",
        "submissions/s",
        "completions/s",
        "vs Redis, tmpfs",
        "service CPU ms/task",
        "CPU vs tmpfs",
        "store B/task",
        "image KiB/task",
      ],
      rows: setups.map((setup) => {
        const x = f(setup);
        return [
          setup.label,
          fmt(x.submissionsPerSec?.median, 1),
          fmtSpread(x.completionsPerSec, (v) => fmt(v, 1)),
          redis(setup, fmtSpread(x.completionsVsTmpfs, fmtRatio)),
          fmtSpread(x.cpuMsPerTask, (v) => fmt(v, 1)),
          redis(setup, fmtSpread(x.cpuVsTmpfs, fmtRatio)),
          fmt(x.storeBytesPerTask, 0),
          fmt(x.imageBytesPerTask === undefined ? undefined : x.imageBytesPerTask / 1024, 0),
        ];
      }),
    },
    {
      title: `Holding finished real-size tasks (up to ${fmt(tasks)}), then expired`,
      columns: [
        "task store, images",
        "tasks held",
        "RSS before MiB",
        "RSS right after MiB",
        "RSS held MiB",
        "heap KiB/task",
        `RSS est. for ${fmt(tasks)} MiB`,
        "RSS after expiry MiB",
        "image files held / after expiry",
      ],
      rows: setups
        .filter((setup) => HOLD.includes(setup.key))
        .map((setup) => holdRow(setup, f(setup))),
    },
  ];
  const { fresh } = out.figures;
  if (fresh?.rounds.length) out.tables.unshift(freshTable(fresh));
}

/** The fresh start's table (see fresh-start.mjs): a row a round, and their median. */
function freshTable(x) {
  const rows = x.rounds.map((r, n) => [
    x.rounds.length > 1 ? `${fmt(x.tasks)} (round ${n + 1})` : fmt(x.tasks),
    fmt(r.cpuMsPerTask, 1),
    r.stepMsPerTask.map((v) => fmt(v, 1)).join(", "),
    fmt(r.rssBeforeMiB, 1),
    fmt(r.rssAfterMiB, 1),
    fmt(r.failed),
  ]);
  if (x.rounds.length > 1) {
    const s = freshSpreads(x);
    rows.push([
      `${fmt(x.tasks)} (median)`,
      fmtSpread(s.cpuMsPerTask, (v) => fmt(v, 1)),
      s.stepMsPerTask.map((v) => fmt(v, 1)).join(", "),
      fmt(s.rssBeforeMiB.median, 1),
      fmtSpread(s.rssAfterMiB, (v) => fmt(v, 1)),
      fmt(x.rounds.reduce((sum, r) => sum + r.failed, 0)),
    ]);
  }
  return {
    title: `Real-size tasks from a fresh start (Redis, images in the default directory's place, ${fmt(x.concurrency)} at a time)`,
    columns: [
      "tasks",
      "service CPU ms/task",
      `per step of ${fmt(x.step)} (ms/task)`,
      "RSS before MiB",
      "RSS after MiB",
      "failed",
    ],
    rows,
  };
}
