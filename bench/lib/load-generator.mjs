// The load generator: a small undici client in its own process, so that its CPU is not the
// service's and the bench's own event loop stays free. Jobs come over IPC:
//   {type: "run", origins, requests, concurrency, durationMs | count, collectIds, timeoutMs}
//     sends `requests` (cycled: {path, method, headers, body, bodyBase64}) to `origins`
//     (worker i uses origin i mod n), `concurrency` at a time, for `durationMs` or `count`
//     requests; answers counts, statuses, RPS, p50/p99 latency (ms) and, with collectIds,
//     the `id` of each 2xx JSON answer in order.
//   {type: "hold", origins, paths, headers, holdMs}: opens one GET per path at once (long waits)
//     and answers how many are still unanswered after `holdMs`; `release` drops them.
import { Pool } from "undici";
import { answerMessages, exitWithParent } from "./children.mjs";

const percentile = (sorted, p) =>
  sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

function pools(origins, connections) {
  return origins.map(
    (origin) =>
      new Pool(origin, {
        connections: Math.max(1, Math.ceil(connections / origins.length)),
        pipelining: 1,
        headersTimeout: 120_000,
        bodyTimeout: 120_000,
        keepAliveTimeout: 60_000,
      }),
  );
}

async function run(job) {
  const { origins, concurrency, durationMs, count, collectIds, timeoutMs = 60_000 } = job;
  const requests = job.requests.map((r) => ({
    path: r.path,
    method: r.method ?? "GET",
    headers: r.headers ?? {},
    body: r.bodyBase64 ? Buffer.from(r.bodyBase64, "base64") : r.body,
  }));
  const clients = pools(origins, concurrency);
  const latencies = [];
  const statuses = {};
  const ids = [];
  let errors = 0;
  let issued = 0;
  const started = performance.now();
  const stopAt = started + (durationMs ?? timeoutMs);
  const hardStop = started + timeoutMs;
  const more = () =>
    count !== undefined
      ? issued < count && performance.now() < hardStop
      : performance.now() < stopAt;
  const worker = async (index) => {
    const client = clients[index % clients.length];
    while (more()) {
      const request = requests[issued % requests.length];
      const slot = issued;
      issued += 1;
      const t0 = performance.now();
      try {
        const res = await client.request(request);
        const text = await res.body.text();
        latencies.push(performance.now() - t0);
        statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
        if (collectIds && res.statusCode < 300) ids[slot] = JSON.parse(text).id;
      } catch {
        errors += 1;
        if (errors > 1000) break; // something is down: stop hammering it
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, i) => worker(i)));
  const seconds = (performance.now() - started) / 1000;
  await Promise.all(clients.map((client) => client.destroy()));
  latencies.sort((a, b) => a - b);
  const ok = Object.entries(statuses)
    .filter(([status]) => Number(status) < 400)
    .reduce((sum, [, n]) => sum + n, 0);
  return {
    requests: latencies.length + errors,
    ok,
    errors,
    statuses,
    seconds,
    rps: ok / seconds,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    ids: collectIds ? ids.filter(Boolean) : undefined,
  };
}

let held;
async function hold({ origins, paths, headers = {}, holdMs }) {
  const clients = pools(origins, paths.length);
  const state = { answered: 0, errors: 0, clients };
  held = state;
  paths.forEach((path, i) => {
    clients[i % clients.length]
      .request({ path, method: "GET", headers })
      .then((res) => res.body.text())
      .then(
        () => (state.answered += 1),
        () => (state.errors += 1),
      );
  });
  await new Promise((resolve) => setTimeout(resolve, holdMs));
  return { opened: paths.length, answered: state.answered, errors: state.errors };
}

async function release() {
  const state = held;
  held = undefined;
  if (state)
    await Promise.all(state.clients.map((client) => client.destroy().catch(() => undefined)));
  return { released: true };
}

exitWithParent(release);
answerMessages({ run, hold, release });
process.send({ ready: true });
