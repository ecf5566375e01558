// Proxy overhead, as ratios measured in one run (never as absolute timings:
// the machine is shared and noisy). Three targets, each in its own process:
//   direct:  client -> upstream
//   pipe:    client -> bare node:http pipe -> upstream
//   sidecar: client -> image-task-sidecar   -> upstream
// For each: CPU time of the middle process per request, and throughput.
// Rounds are interleaved so drift hits every target alike; medians reported.
//
//   npm run bench            (ROUNDS=3 REQUESTS=4000 CONNECTIONS=16 by default)
//   BASELINE=/path/to/old/dist npm run bench
//                            adds a fourth target, another build of the sidecar (its dist/
//                            beside a node_modules), measured in the same rounds: before/after.
import { fork } from "node:child_process";
import { createServer, request } from "node:http";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Pool } from "undici";

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const REQUESTS = Number(process.env.REQUESTS ?? 4000);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 16);
const KEY = "sk-bench-key-0001";

async function runRole(name, upstreamUrl, dist = "../dist") {
  // A normal exit, so --cpu-prof can write its profile.
  process.on("SIGINT", () => process.exit(0));
  const reportCpu = () =>
    process.on("message", (msg) => msg === "cpu" && process.send({ cpu: process.cpuUsage() }));
  if (name === "upstream") {
    const answer = JSON.stringify({
      id: "chatcmpl-bench",
      object: "chat.completion",
      created: 0,
      model: "gpt-4o-mini",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: "x".repeat(800) },
          finish_reason: "stop",
        },
      ],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    });
    const server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(answer),
        });
        res.end(answer);
      });
    });
    server.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }));
    reportCpu();
    return;
  }
  if (name === "pipe") {
    const target = new URL(upstreamUrl);
    const server = createServer((req, res) => {
      const headers = { ...req.headers, host: target.host, authorization: "Bearer upstream" };
      const upstream = request(
        {
          host: target.hostname,
          port: target.port,
          path: req.url.replace(/^\/v1/, "/v1"),
          method: req.method,
          headers,
        },
        (upstreamRes) => {
          res.writeHead(upstreamRes.statusCode, upstreamRes.headers);
          upstreamRes.pipe(res);
        },
      );
      upstream.on("error", () => res.destroy());
      req.pipe(upstream);
    });
    server.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }));
    reportCpu();
    return;
  }
  if (name === "sidecar" || name === "baseline") {
    const { parseConfig } = await import(`${dist}/config/load-config.js`);
    const { startServer } = await import(`${dist}/server.js`);
    const { pino } = await import("pino");
    const config = parseConfig({
      server: { port: 0, host: "127.0.0.1" },
      store: { url: "memory://" },
      auth: { keys: [{ key: KEY, group: "all" }] },
      groups: { all: { models: ["*"] } },
      channels: [
        {
          name: "bench",
          baseUrl: `${upstreamUrl}/v1`,
          apiKey: "upstream",
          models: ["gpt-4o-mini"],
        },
      ],
      logging: { level: "silent" },
    });
    const running = await startServer({
      config,
      logger: pino({ level: "silent" }),
      defaultMetrics: false,
    });
    process.send({ port: running.port });
    reportCpu();
  }
}

function start(name, upstreamUrl, dist) {
  // BENCH_PROFILE=sidecar writes a V8 CPU profile of that process to ./bench-profiles.
  const execArgv =
    process.env.BENCH_PROFILE === name
      ? ["--cpu-prof", "--cpu-prof-interval=50", "--cpu-prof-dir=bench-profiles"]
      : [];
  const args = [name, upstreamUrl ?? "", ...(dist ? [dist] : [])];
  const child = fork(fileURLToPath(import.meta.url), args, {
    stdio: "inherit",
    execArgv,
  });
  return new Promise((resolve) =>
    child.once("message", ({ port }) => resolve({ child, url: `http://127.0.0.1:${port}` })),
  );
}

function cpuOf(child) {
  return new Promise((resolve) => {
    child.once("message", ({ cpu }) => resolve((cpu.user + cpu.system) / 1000)); // ms
    child.send("cpu");
  });
}

async function load(url, count) {
  const pool = new Pool(url, { connections: CONNECTIONS, pipelining: 1 });
  const body = JSON.stringify({
    model: "gpt-4o-mini",
    messages: [{ role: "user", content: "hello" }],
  });
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next += 1;
      const res = await pool.request({
        path: "/v1/chat/completions",
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
        body,
      });
      if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
      await res.body.arrayBuffer();
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  const seconds = (performance.now() - started) / 1000;
  await pool.close();
  return count / seconds;
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function main() {
  const upstream = await start("upstream");
  const pipe = await start("pipe", upstream.url);
  const sidecar = await start("sidecar", upstream.url);
  const targets = { direct: upstream, pipe, sidecar };
  if (process.env.BASELINE) {
    targets.baseline = await start(
      "baseline",
      upstream.url,
      pathToFileURL(process.env.BASELINE).href,
    );
  }
  for (const target of Object.values(targets)) await load(target.url, 500); // warm-up (JIT, sockets)

  const results = Object.fromEntries(Object.keys(targets).map((name) => [name, []]));
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const [name, target] of Object.entries(targets)) {
      // The CPU that matters is the middle process's: the upstream's for direct.
      const before = await cpuOf(target.child);
      const rps = await load(target.url, REQUESTS);
      const cpuMs = (await cpuOf(target.child)) - before;
      results[name].push({ rps, cpuUsPerRequest: (cpuMs * 1000) / REQUESTS });
    }
  }
  const summary = Object.fromEntries(
    Object.entries(results).map(([name, rows]) => [
      name,
      {
        rps: median(rows.map((r) => r.rps)),
        cpuUsPerRequest: median(rows.map((r) => r.cpuUsPerRequest)),
        // The least disturbed round: other processes on the machine only ever add CPU time.
        cpuUsMin: Math.min(...rows.map((r) => r.cpuUsPerRequest)),
      },
    ]),
  );
  console.log(`rounds=${ROUNDS} requests=${REQUESTS} connections=${CONNECTIONS}`);
  for (const [name, { rps, cpuUsPerRequest, cpuUsMin }] of Object.entries(summary)) {
    console.log(
      `${name.padEnd(8)} ${rps.toFixed(0).padStart(7)} req/s   ${cpuUsPerRequest.toFixed(1).padStart(7)} us CPU/request (middle process; least ${cpuUsMin.toFixed(1)})`,
    );
  }
  console.log(
    `sidecar/pipe CPU per request:  ${(summary.sidecar.cpuUsPerRequest / summary.pipe.cpuUsPerRequest).toFixed(2)}x`,
  );
  console.log(
    `sidecar/pipe throughput:       ${(summary.sidecar.rps / summary.pipe.rps).toFixed(2)}x`,
  );
  console.log(
    `sidecar/direct throughput:     ${(summary.sidecar.rps / summary.direct.rps).toFixed(2)}x`,
  );
  if (summary.baseline) {
    console.log(
      `baseline/pipe CPU per request: ${(summary.baseline.cpuUsPerRequest / summary.pipe.cpuUsPerRequest).toFixed(2)}x`,
    );
    console.log(
      `sidecar/baseline CPU per request: ${(summary.sidecar.cpuUsPerRequest / summary.baseline.cpuUsPerRequest).toFixed(2)}x median, ${(summary.sidecar.cpuUsMin / summary.baseline.cpuUsMin).toFixed(2)}x least`,
    );
  }
  for (const target of Object.values(targets)) target.child.kill("SIGINT");
}

const role = process.argv[2];
if (role) await runRole(role, process.argv[3], process.argv[4]);
else await main();
