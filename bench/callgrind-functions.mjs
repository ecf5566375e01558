// Instructions by function, from a callgrind dump the instructions phase kept
// (BENCH_CALLGRIND_KEEP=dir): where a process's instructions per request go, JavaScript named.
// Callgrind names V8's builtins and runtime, Node's and libc's C and C++ code, but sees code V8
// compiled as bare addresses; the counted processes ran with --perf-basic-prof when kept, and the
// map V8 wrote (perf-<pid>.map, copied beside the dumps) names each address's function.
//
//   node bench/callgrind-functions.mjs DUMP [--per N] [--top N]
//        self instructions per function (per request with --per, the requests counted)
//   node bench/callgrind-functions.mjs DUMP --against OTHER [--per N] [--top N]
//        what DUMP runs beyond OTHER, function by function (two processes, the same requests)
//   node bench/callgrind-functions.mjs DUMP --callers PATTERN [--per N]
//        who calls the functions whose name holds PATTERN, and what each call cost inclusive
//   node bench/callgrind-functions.mjs DUMP --inclusive PATTERN [--per N]
//        the inclusive cost of the functions whose name holds PATTERN, and their callees'
//   --event NAME (with any of them): another of the dump's events than instructions (Ir), such as
//        the cache misses and mispredicted branches of a count made with BENCH_CALLGRIND_CACHE=1;
//        --events prints every event's total
//
// Inclusive costs of async functions mislead (callgrind follows the stack, which an await
// leaves); a synchronous function's, and every self cost, hold.
import { existsSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { parseArgs } from "node:util";

/** The functions V8 compiled, from its perf map: sorted by start address. */
function loadPerfMap(dump) {
  const pid = /\.(\d+)\.\d+-\d+$/.exec(basename(dump))?.[1];
  const file = [join(dirname(dump), `perf-${pid}.map`), `/tmp/perf-${pid}.map`].find(existsSync);
  if (!file) return [];
  const entries = [];
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const first = line.indexOf(" ");
    const second = line.indexOf(" ", first + 1);
    if (second === -1) continue;
    const start = parseInt(line.slice(0, first), 16);
    entries.push({
      start,
      end: start + parseInt(line.slice(first + 1, second), 16),
      name: line.slice(second + 1),
    });
  }
  // Code moved or recompiled is written again later: the later entry wins a tie.
  return entries
    .map((entry, order) => ({ ...entry, order }))
    .sort((a, b) => a.start - b.start || a.order - b.order);
}

/** A name for callgrind's function: its own, or V8's for an address of compiled code. */
function namer(map) {
  const starts = map.map((entry) => entry.start);
  const cache = new Map();
  return (fn) => {
    let name = cache.get(fn);
    if (name !== undefined) return name;
    name = fn;
    const address = /^0x([0-9a-f]+)/.exec(fn);
    if (address) {
      const at = parseInt(address[1], 16);
      let lo = 0;
      let hi = starts.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (starts[mid] <= at) lo = mid + 1;
        else hi = mid;
      }
      name = "compiled code, unnamed";
      for (let i = lo - 1; i >= 0 && i >= lo - 64; i -= 1) {
        if (at < map[i].end) {
          name = `JS ${map[i].name}`;
          break;
        }
      }
    }
    cache.set(fn, name);
    return name;
  };
}

/** Self costs per function and inclusive costs per call edge, names resolved. */
function readDump(dump, event = "Ir") {
  const name = namer(loadPerfMap(dump));
  const self = new Map();
  const edges = new Map();
  let fn = "";
  let callee = "";
  let afterCalls = false;
  let total = 0;
  // A cost line is a position, then one number per event in the header's order (trailing
  // zeros left out).
  let column = 1;
  let events = [];
  let totals = [];
  for (const line of readFileSync(dump, "utf8").split("\n")) {
    if (line.startsWith("events:")) {
      events = line.slice(7).trim().split(/\s+/);
      column = events.indexOf(event) + 1;
      if (column === 0)
        throw new Error(`no event ${event} in ${dump} (it has ${events.join(" ")})`);
    } else if (line.startsWith("totals:") || line.startsWith("summary:")) {
      totals = line.split(":")[1].trim().split(/\s+/).map(Number);
    } else if (line.startsWith("fn=")) {
      fn = name(line.slice(3).trim());
      afterCalls = false;
    } else if (line.startsWith("cfn=")) callee = name(line.slice(4).trim());
    else if (line.startsWith("calls=")) afterCalls = true;
    else if (/^[0-9+\-*]/.test(line)) {
      const cost = Number(line.split(" ")[column] ?? 0);
      if (afterCalls) {
        const key = `${fn}\u0000${callee}`;
        edges.set(key, (edges.get(key) ?? 0) + cost);
        afterCalls = false;
      } else {
        self.set(fn, (self.get(fn) ?? 0) + cost);
        total += cost;
      }
    }
  }
  return { self, edges, total, events, totals };
}

const fmt = (value, per) => String(Math.round(value / per)).padStart(9);

function printSelf({ self, total }, per, top) {
  console.log(`${fmt(total, per)} in all`);
  for (const [fn, cost] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${fmt(cost, per)} ${fn}`);
  }
}

/** Every event's total (against another dump's, when given). */
function printEvents(a, b, per) {
  a.events.forEach((event, index) => {
    const mine = a.totals[index] ?? 0;
    const theirs = b ? ` against ${fmt(b.totals[b.events.indexOf(event)] ?? 0, per).trim()}` : "";
    console.log(`${fmt(mine, per)} ${event}${theirs}`);
  });
}

function printAgainst(a, b, per, top) {
  console.log(
    `${fmt(a.total - b.total, per)} more in all (${fmt(a.total, per).trim()} against ${fmt(b.total, per).trim()})`,
  );
  const names = new Set([...a.self.keys(), ...b.self.keys()]);
  const rows = [...names].map((fn) => [fn, (a.self.get(fn) ?? 0) - (b.self.get(fn) ?? 0)]);
  for (const [fn, more] of rows.sort((x, y) => y[1] - x[1]).slice(0, top)) {
    console.log(
      `${fmt(more, per)} ${fmt(a.self.get(fn) ?? 0, per)} ${fmt(b.self.get(fn) ?? 0, per)}  ${fn}`,
    );
  }
}

function printEdges({ self, edges }, per, pattern, side) {
  const groups = new Map();
  for (const [key, cost] of edges) {
    const [caller, callee] = key.split("\u0000");
    const [subject, other] = side === "callers" ? [callee, caller] : [caller, callee];
    if (!subject.includes(pattern)) continue;
    const group = groups.get(subject) ?? new Map();
    group.set(other, (group.get(other) ?? 0) + cost);
    groups.set(subject, group);
  }
  for (const [subject, group] of groups) {
    const rows = [...group].sort((x, y) => y[1] - x[1]);
    // Callers: the calls' inclusive costs; callees: the function's own cost and its calls'.
    const own = side === "callers" ? 0 : (self.get(subject) ?? 0);
    const sum = rows.reduce((all, [, cost]) => all + cost, own);
    const note = own ? `, itself ${fmt(own, per).trim()}` : "";
    console.log(`${fmt(sum, per)} ${subject} (${side}${note})`);
    for (const [other, cost] of rows.slice(0, 12)) console.log(`  ${fmt(cost, per)} ${other}`);
  }
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    per: { type: "string", default: "1" },
    top: { type: "string", default: "60" },
    against: { type: "string" },
    callers: { type: "string" },
    inclusive: { type: "string" },
    event: { type: "string", default: "Ir" },
    events: { type: "boolean", default: false },
  },
});
if (positionals.length !== 1) {
  console.error(
    "usage: node bench/callgrind-functions.mjs DUMP [--per N] [--top N] [--event NAME | --events] [--against DUMP | --callers TEXT | --inclusive TEXT]",
  );
  process.exit(2);
}
const dump = readDump(positionals[0], values.event);
const per = Number(values.per);
const top = Number(values.top);
if (values.events) printEvents(dump, values.against && readDump(values.against), per);
else if (values.against) printAgainst(dump, readDump(values.against, values.event), per, top);
else if (values.callers) printEdges(dump, per, values.callers, "callers");
else if (values.inclusive) printEdges(dump, per, values.inclusive, "callees");
else printSelf(dump, per, top);
