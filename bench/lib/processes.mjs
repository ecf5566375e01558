// Starting the bench's processes: the fake channel, the bare pipe, the service (from a dist/
// with a configuration file written to the run's temp dir) and the load generator.
import { writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { startChild } from "./children.mjs";
import { underTest } from "./cores.mjs";
import { perfRecorder } from "./perf-record.mjs";

/** The bench's API key (static, in a group that may use every model). */
export const KEY = "sk-bench-key-0001";
export const AUTH = { authorization: `Bearer ${KEY}` };
export const JSON_HEADERS = { ...AUTH, "content-type": "application/json" };

const PROFILE_DIR = resolve(import.meta.dirname, "../../bench-profiles");
let profiles = 0;

/**
 * `--cpu-prof` for the role named in BENCH_PROFILE (service, access-off, traced, pipe,
 * undici-pipe, channel, baseline): one profile per process of that role, named after the
 * phase, the role and `label` (the store of a tasks setup, say), into bench-profiles/.
 */
function profileArgs(ctx, role, label) {
  const wanted = ctx.options.profile === "sidecar" ? "service" : ctx.options.profile;
  // Under callgrind a profiler's sampling would be counted as the process's own work.
  if (wanted !== role || ctx.group === "instructions") return [];
  profiles += 1;
  const name = [ctx.group, role, label, profiles].filter(Boolean).join("-");
  return [
    "--cpu-prof",
    "--cpu-prof-interval=100",
    `--cpu-prof-dir=${PROFILE_DIR}`,
    `--cpu-prof-name=${name}.cpuprofile`,
  ];
}

/** The prefix a process under test runs with: `prefix` when given, else the pinning's. */
const testPrefix = (ctx, prefix) => prefix ?? underTest(ctx.options.pinning);

/** A started process: its URL, `stats()` (CPU, memory) and `gc()` (the same after a GC). */
function wrap(started, role, perf) {
  perf?.attach(started.child.pid);
  return {
    role,
    url: started.ready.url,
    child: started.child,
    stats: () => started.ask({ type: "stats" }, 10_000),
    gc: () => started.ask({ type: "gc" }, 10_000),
    ask: started.ask,
    /** A graceful stop (a CPU profile gets written), SIGKILL after `graceMs`. */
    stop: async (graceMs = 3000) => {
      if (started.child.exitCode !== null || started.child.signalCode !== null) return;
      if (started.child.connected) started.child.send({ type: "stop" });
      const timer = setTimeout(() => started.child.kill("SIGKILL"), graceMs);
      await started.exited;
      clearTimeout(timer);
      await perf?.done();
    },
  };
}

/** The fake channel, on the load side's cores (it stands for the network and the gateway). */
export async function startFakeChannel(ctx, options = {}) {
  const perf = perfRecorder(ctx, "channel");
  const started = await startChild("fake-channel.mjs", [JSON.stringify(options)], {
    group: ctx.group,
    execArgv: [...profileArgs(ctx, "channel"), ...perf.args],
  });
  return wrap(started, "channel", perf);
}

/**
 * The bare node:http pipe, on the cores under test; `prefix` runs it some other way
 * (under valgrind). `timeoutMs` bounds its start.
 */
export async function startPipe(ctx, channelUrl, { prefix, timeoutMs } = {}) {
  const perf = perfRecorder(ctx, "pipe");
  const started = await startChild("bare-pipe.mjs", [channelUrl], {
    group: ctx.group,
    execArgv: ["--expose-gc", ...profileArgs(ctx, "pipe"), ...perf.args],
    prefix: testPrefix(ctx, prefix),
    timeoutMs,
  });
  return wrap(started, "pipe", perf);
}

/** The bare pipe with undici as its client (see undici-pipe.mjs), as {@link startPipe}. */
export async function startUndiciPipe(ctx, channelUrl, { prefix, timeoutMs } = {}) {
  const perf = perfRecorder(ctx, "undici-pipe");
  const started = await startChild("undici-pipe.mjs", [channelUrl], {
    group: ctx.group,
    execArgv: ["--expose-gc", ...profileArgs(ctx, "undici-pipe"), ...perf.args],
    prefix: testPrefix(ctx, prefix),
    timeoutMs,
  });
  return wrap(started, "undici-pipe", perf);
}

export async function startLoader(ctx) {
  const started = await startChild("load-generator.mjs", [], { group: ctx.group });
  return {
    /** Runs a load job (see load-generator.mjs); never waits past the job's own timeout. */
    run: (job) =>
      started.ask({ type: "run", timeoutMs: 60_000, ...job }, (job.timeoutMs ?? 60_000) + 15_000),
    hold: (job) => started.ask({ type: "hold", ...job }, job.holdMs + 15_000),
    release: () => started.ask({ type: "release" }, 15_000),
  };
}

let configs = 0;

/** The service's configuration: one fake channel, one static key, limits raised for the bench. */
export function serviceConfig({
  channelUrl,
  storeUrl = "memory://",
  prefix,
  imageTasks = {},
  logging = { level: "silent" },
}) {
  return {
    server: { port: 0, host: "127.0.0.1" },
    store: { url: storeUrl, ...(prefix ? { prefix } : {}) },
    auth: { keys: [{ key: KEY, group: "bench", name: "bench" }] },
    groups: { bench: { models: ["*"] } },
    channels: [
      {
        name: "fake",
        baseUrl: `${channelUrl}/v1`,
        apiKey: "sk-upstream-bench",
        models: ["gpt-4o-mini", "gpt-image-1", "gpt-image-slow"],
      },
    ],
    imageTasks: {
      maxConcurrent: 16,
      maxQueued: 1_000_000,
      maxQueuedPerKey: 1_000_000,
      maxRetainedPerKey: 1_000_000,
      retentionSec: 3600,
      ...imageTasks,
    },
    logging,
  };
}

/**
 * Node's flags for the service's own processes (role `service`), from BENCH_SERVICE_NODE_ARGS:
 * a V8 flag measured against the same build without it (BASELINE=dist, at the same time). Role
 * `baseline` takes BENCH_BASELINE_NODE_ARGS: both builds under the same flags (a young
 * generation of one fixed size, say, so that V8's sizing of it does not differ between them).
 */
function nodeArgs(role) {
  const args =
    role === "service"
      ? process.env.BENCH_SERVICE_NODE_ARGS
      : role === "baseline"
        ? process.env.BENCH_BASELINE_NODE_ARGS
        : undefined;
  return args ? args.split(" ").filter(Boolean) : [];
}

/**
 * Starts the service from `dist` (default the run's, or `ctx.options.baseline` for role
 * "baseline") with `config` written as a file in the run's temp dir; its log lines go to a file
 * there (as stdout would take them), and `env` is the environment the config is loaded with
 * (the OTEL_* variables of a traced variant). It runs on the cores under test, or with
 * `prefix` (valgrind); `processEnv` changes its process's environment (undefined removes a
 * variable); `label` names its CPU profile.
 */
export async function startService(
  ctx,
  config,
  { role = "service", dist, env = {}, prefix, processEnv, label, timeoutMs = 30_000 } = {},
) {
  configs += 1;
  const file = join(ctx.tempDir, `service-${configs}.yaml`);
  // Redis's default image directory is ./data/images: the run's own, which it deletes, instead.
  const images =
    config.images ??
    (/^rediss?:/.test(config.store.url)
      ? { url: `file://${join(ctx.tempDir, "images")}` }
      : undefined);
  await writeFile(file, JSON.stringify({ ...config, images }, null, 2)); // JSON is YAML
  const from = dist ?? (role === "baseline" ? ctx.options.baseline : ctx.options.dist);
  const options = JSON.stringify({ logFile: join(ctx.tempDir, `service-${configs}.log`), env });
  const perf = perfRecorder(ctx, role, label);
  const started = await startChild("service-process.mjs", [from, file, options], {
    group: ctx.group,
    execArgv: ["--expose-gc", ...profileArgs(ctx, role, label), ...perf.args, ...nodeArgs(role)],
    timeoutMs,
    prefix: testPrefix(ctx, prefix),
    env: processEnv,
  });
  return wrap(started, role, perf);
}
