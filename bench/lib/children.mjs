// Every process the bench starts goes through here, so that all of them are killed at the
// end of a phase, of the run, on an error or on Ctrl-C. A child never outlives the bench:
// the bench's own children also exit when their IPC channel to the bench closes.
import { fork, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const LIB = fileURLToPath(new URL(".", import.meta.url));

/** Children started and not yet gone, by pid. */
const running = new Map();
/** Every child's pid, for the record (a test checks that none is left). */
export const startedPids = [];

/** Keeps `child` in the list of running children until it exits; resolves its exit. */
function track(child, group, script) {
  const entry = { child, group, script, exited: false };
  startedPids.push(child.pid);
  running.set(child.pid, entry);
  const exited = new Promise((resolve) =>
    child.once("exit", (code, signal) => {
      entry.exited = true;
      running.delete(child.pid);
      resolve(code ?? signal);
    }),
  );
  child.on("error", () => undefined);
  return { entry, exited };
}

/**
 * Forks `bench/lib/<script>` with `args`; resolves once the child sends its first message
 * (`{ ready, ... }`), rejects if it exits first or does not report within `timeoutMs`.
 * `group` names the phase that owns it, so a phase's children can be killed together.
 * `prefix` is a command that runs node (`taskset -c 1`, `valgrind ...`): it execs node in the
 * same process, so the pid, the IPC channel and the kill on exit still reach node.
 * `env` adds to (or, with undefined values, removes from) the bench's environment.
 */
export async function startChild(
  script,
  args,
  { group, execArgv = [], timeoutMs = 20_000, prefix = [], env = {} } = {},
) {
  const childEnv = { ...process.env, NODE_ENV: "production", ...env };
  for (const [name, value] of Object.entries(childEnv))
    if (value === undefined) delete childEnv[name];
  const child = fork(`${LIB}${script}`, args.map(String), {
    stdio: ["ignore", "ignore", "inherit", "ipc"],
    ...(prefix.length
      ? { execPath: prefix[0], execArgv: [...prefix.slice(1), process.execPath, ...execArgv] }
      : { execArgv }),
    env: childEnv,
  });
  const { entry, exited } = track(child, group, script);
  const ready = await new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${script} did not start in ${timeoutMs} ms`)),
      timeoutMs,
    );
    child.once("message", (message) => {
      clearTimeout(timer);
      resolve(message);
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${code}) before it was ready`));
    });
  }).catch((err) => {
    child.kill("SIGKILL");
    throw err;
  });
  return { child, ready, exited, ask: (message, ms) => ask(entry, message, ms) };
}

/**
 * Starts a program that is not one of the bench's scripts (nginx, wrk), killed with the rest.
 * Resolves `{ child, exited }`; its stdout is collected in `child.output` when `collect`.
 */
export function startProgram(command, args, { group, collect = false } = {}) {
  const child = spawn(command, args.map(String), {
    stdio: ["ignore", collect ? "pipe" : "ignore", "pipe"],
  });
  child.on("error", () => undefined);
  if (child.pid === undefined) throw new Error(`${command} could not be started`);
  child.output = "";
  child.errors = "";
  if (collect) child.stdout.setEncoding("utf8").on("data", (text) => (child.output += text));
  child.stderr.setEncoding("utf8").on("data", (text) => (child.errors += text));
  const { exited } = track(child, group, command);
  return { child, exited };
}

let sequence = 0;

/**
 * Sends `message` (an object) with a fresh `seq` and resolves the child's answer carrying the
 * same `seq`. Rejects when the child exits or after `timeoutMs`: no call ever waits forever.
 */
function ask(entry, message, timeoutMs = 30_000) {
  const { child } = entry;
  if (entry.exited || !child.connected) {
    return Promise.reject(new Error(`${entry.script} is gone`));
  }
  sequence += 1;
  const seq = sequence;
  return new Promise((resolve, reject) => {
    const done = (fn, value) => {
      clearTimeout(timer);
      child.off("message", onMessage);
      child.off("exit", onExit);
      fn(value);
    };
    const onMessage = (answer) => {
      if (answer?.seq !== seq) return;
      if (answer.error) done(reject, new Error(`${entry.script}: ${answer.error}`));
      else done(resolve, answer);
    };
    const onExit = () => done(reject, new Error(`${entry.script} exited`));
    const timer = setTimeout(
      () =>
        done(
          reject,
          new Error(`${entry.script} did not answer ${message.type} in ${timeoutMs} ms`),
        ),
      timeoutMs,
    );
    child.on("message", onMessage);
    child.once("exit", onExit);
    child.send({ ...message, seq });
  });
}

/**
 * Stops children: a graceful `stop` first (so that `--cpu-prof` can write its profile), then
 * SIGKILL for any still there after `graceMs`. With a `group`, only that group's children.
 */
export async function stopChildren(group, graceMs = 1500) {
  const entries = [...running.values()].filter((entry) => !group || entry.group === group);
  await Promise.all(
    entries.map(async (entry) => {
      const gone = new Promise((resolve) => {
        if (entry.exited) resolve();
        else entry.child.once("exit", resolve);
      });
      try {
        if (entry.child.connected) entry.child.send({ type: "stop" });
        else entry.child.kill("SIGTERM");
      } catch {
        entry.child.kill("SIGKILL");
      }
      const timer = setTimeout(() => entry.child.kill("SIGKILL"), graceMs);
      await gone;
      clearTimeout(timer);
    }),
  );
}

/** Kills every child at once, synchronously (for `exit` and signal handlers). */
export function killAllNow() {
  for (const { child } of running.values()) {
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
}

/** How many children are still running. */
export const childCount = () => running.size;

/**
 * In a child: exit when the bench goes away (its IPC channel closes), on SIGINT/SIGTERM, and
 * on a `stop` message after `onStop` (graceful, so a CPU profile gets written).
 */
export function exitWithParent(onStop = async () => undefined) {
  const stop = () =>
    void Promise.race([onStop(), new Promise((resolve) => setTimeout(resolve, 1000))]).finally(() =>
      process.exit(0),
    );
  process.on("disconnect", stop);
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  process.on("message", (message) => {
    if (message?.type === "stop") stop();
  });
}

/** In a child: answers `{type}` messages with `handlers[type](message)`, echoing `seq`. */
export function answerMessages(handlers) {
  process.on("message", (message) => {
    const handler = handlers[message?.type];
    if (!handler) return;
    Promise.resolve()
      .then(() => handler(message))
      .then(
        (answer) => process.connected && process.send({ ...answer, seq: message.seq }),
        (err) =>
          process.connected &&
          process.send({ error: String(err?.message ?? err), seq: message.seq }),
      );
  });
}

const usage = () => ({ cpu: process.cpuUsage(), memory: process.memoryUsage() });

/**
 * In a measured child: `stats` (CPU time and memory) and `gc` (the same after two full
 * collections when run with --expose-gc; array buffers freed by the first are swept in the
 * background meanwhile), for {@link answerMessages}.
 */
export const statsHandlers = {
  stats: usage,
  gc: () =>
    new Promise((done) => {
      globalThis.gc?.();
      setTimeout(() => {
        globalThis.gc?.();
        done(usage());
      }, 20);
    }),
};
