// The tasks phase's figures and tables: medians over rounds with their spread, and the
// ratios the targets are judged on, taken round by round.
import { fmt, fmtRatio, fmtSpread, spread } from "./stats.mjs";

/** Round-by-round ratios of `value(sample)` between two lists of samples. */
export function pairedBy(list, reference, value) {
  if (!list || !reference) return null;
  const n = Math.min(list.length, reference.length);
  return spread(Array.from({ length: n }, (_, i) => value(list[i]) / value(reference[i])));
}

const perTask = (sample) => sample.submissions.cpuUsPerTask;

function figuresOf(samples) {
  const of = (value) => spread(samples.map(value));
  return {
    rounds: samples.length,
    submissions: {
      perSec: of((s) => s.submissions.perSec),
      cpuUsPerRequest: of((s) => s.submissions.cpuUsPerRequest),
      cpuUsPerTask: of(perTask),
      completedPerSec: of((s) => s.submissions.completedPerSec),
    },
    polls: {
      perSec: of((s) => s.polls.perSec),
      cpuUsPerRequest: of((s) => s.polls.cpuUsPerRequest),
    },
    chat: samples[0]?.chat
      ? { perSec: of((s) => s.chat.perSec), cpuUsPerRequest: of((s) => s.chat.cpuUsPerRequest) }
      : undefined,
    pollVsChat: samples[0]?.chat
      ? spread(samples.map((s) => s.polls.cpuUsPerRequest / s.chat.cpuUsPerRequest))
      : undefined,
  };
}

/** Figures (medians and spreads) and tables from the samples so far. */
export function summarize(out, setups) {
  const { samples } = out.figures;
  for (const setup of setups) {
    if (!samples[setup.key]) continue;
    out.figures.setups[setup.key] = {
      label: setup.label,
      replicas: setup.replicas,
      ...out.figures.setups[setup.key],
      ...figuresOf(samples[setup.key]),
    };
  }
  const f = out.figures.setups;
  out.figures.redis1VsMemory = pairedBy(samples["redis-1"], samples.memory, perTask);
  out.figures.redis3VsRedis1 = pairedBy(samples["redis-3"], samples["redis-1"], perTask);
  // Three processes on the core under test, without task work: the chat passthrough's CPU.
  out.figures.redis3VsRedis1Chat = samples["redis-3"]?.[0]?.chat
    ? pairedBy(samples["redis-3"], samples["redis-1"], (sample) => sample.chat.cpuUsPerRequest)
    : null;
  out.figures.redis1VsMemoryBaseline = pairedBy(
    samples["redis-1-baseline"],
    samples["memory-baseline"],
    perTask,
  );
  out.figures.pollVsChat = f.memory?.pollVsChat ?? null;
  out.tables = [
    {
      title: "Tasks: submissions, polls and held waits per store",
      columns: [
        "store",
        "submits/s",
        "CPU µs/submit (window)",
        "CPU µs/task (to finished)",
        "completed/s",
        "polls/s",
        "CPU µs/poll",
        "waits held",
        "RSS added MiB",
        "CPU ms/s holding",
      ],
      rows: setups
        .filter((setup) => f[setup.key])
        .map((setup) => {
          const x = f[setup.key];
          const w = x.waits;
          return [
            x.label,
            fmt(x.submissions?.perSec?.median),
            fmt(x.submissions?.cpuUsPerRequest?.median),
            fmtSpread(x.submissions?.cpuUsPerTask),
            fmt(x.submissions?.completedPerSec?.median),
            fmt(x.polls?.perSec?.median),
            fmtSpread(x.polls?.cpuUsPerRequest),
            w ? `${fmt(w.held)} of ${fmt(w.opened)}` : "-",
            fmt(w?.rssAddedMiB, 1),
            fmt(w?.cpuMsPerSecHolding, 1),
          ];
        }),
    },
  ];
  const chatRows = setups.filter((setup) => f[setup.key]?.chat);
  if (chatRows.length) {
    out.tables.push({
      title: "Tasks: a poll against a chat passthrough (on the same services, concurrency 32)",
      columns: ["store", "chat/s", "CPU µs/chat", "polls/s", "CPU µs/poll", "poll vs chat"],
      rows: chatRows.map((setup) => {
        const x = f[setup.key];
        return [
          x.label,
          fmt(x.chat.perSec.median),
          fmtSpread(x.chat.cpuUsPerRequest),
          fmt(x.polls.perSec.median),
          fmtSpread(x.polls.cpuUsPerRequest),
          fmtSpread(x.pollVsChat, fmtRatio),
        ];
      }),
    });
  }
  if (out.figures.held?.length) {
    out.tables.push({
      title: "Tasks: submissions and polls on a store that holds many finished tasks of the key",
      columns: [
        "store",
        "tasks held",
        "store CPU µs/task written",
        "submits/s",
        "CPU µs/submit",
        "polls/s",
        "CPU µs/poll",
      ],
      rows: out.figures.held.map((row) => [
        row.label,
        fmt(row.held),
        fmt(row.writeCpuUs),
        fmt(row.submissions.perSec),
        fmt(row.submissions.cpuUsPerRequest),
        fmt(row.polls?.perSec),
        fmt(row.polls?.cpuUsPerRequest),
      ]),
    });
  }
  out.notes = [
    `${out.figures.rounds} interleaved rounds of ${fmt(out.figures.durationMs / 1000, 1)} s per load; median (min–max) over rounds, ratios taken round by round. CPU is the service processes' own (all replicas), over the requests they served.`,
    "CPU µs/task: from the first submission of a round until its last task finished, over the tasks (the submission, the run, the stored result); CPU µs/submit (window): within the submission window only.",
    "Store CPU µs/task written: the store code's own CPU (create + transition, in the bench process, as the build writes them) over 1,000 tasks written once the store held that many; on Redis without the server's.",
    "Waits held: GETs with ?wait=30 still open after a while, on tasks whose channel never answers; RSS added over the idle service, CPU while only holding them.",
    // What the phase noted of this run (kept here: each summary writes the notes anew).
    ...(out.figures.notes ?? []),
  ];
}
