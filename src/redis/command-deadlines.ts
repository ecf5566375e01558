import type { Logger } from "pino";
import type { Cluster, Command, Redis } from "ioredis";
import type { RedisClient } from "./redis-client.js";
import { eachConnection } from "./redis-topologies.js";

/**
 * Commands that wait on the server by design, and how long by their
 * arguments, in ms (`Infinity`: for ever, or unreadable).
 */
const BLOCKING: Record<string, (args: readonly unknown[]) => number> = {
  blpop: (args) => seconds(args.at(-1)),
  brpop: (args) => seconds(args.at(-1)),
  brpoplpush: (args) => seconds(args.at(-1)),
  blmove: (args) => seconds(args.at(-1)),
  // BullMQ's blocking reads (a worker's fetch, QueueEvents) carry their own watchdog, which
  // resets the connection when a read does not settle in time; a second watch cutting the same
  // connection at another moment keeps both resetting it, in a loop, after Redis paused.
  bzpopmin: () => Infinity,
  bzpopmax: (args) => seconds(args.at(-1)),
  blmpop: (args) => seconds(args[0]),
  bzmpop: (args) => seconds(args[0]),
  xread: () => Infinity,
  xreadgroup: blockOption,
  wait: (args) => millis(args[1]),
};

/** Commands a deadline gave up on: never sent afterwards (from an offline queue, say). */
const givenUp = new WeakSet<Command>();

/** Options of {@link watchCommandDeadlines}. */
export interface DeadlineOptions {
  timeoutMs: number;
  logger: Logger;
  /** Names the connection in log lines. */
  name: string;
}

/**
 * Gives every command of an ioredis client a deadline: `timeoutMs` after it
 * was sent (plus its own wait, for a blocking command; a command queued
 * behind one waits for it too). A command past its deadline fails (503
 * `store_unavailable` on task routes) and is never sent later, from an
 * offline queue or a resend: a submission that answered 503 cannot create
 * its task a minute later. A connection that lets a command pass its deadline
 * is taken as hung (a paused or failing-over Redis accepts connections and
 * never answers) and cut, so that it reconnects (through the sentinels to the
 * master of the moment, for a Sentinel set).
 *
 * On a Cluster the deadline is the cluster's (it covers its offline queue,
 * redirections and retries); each node's connection is watched for hangs as
 * it is made. Duplicates (BullMQ's blocking connections, the subscriber) are
 * watched too.
 */
export function watchCommandDeadlines(client: RedisClient, options: DeadlineOptions): RedisClient {
  eachConnection(client, (target, connection) =>
    watch(target, options, { cut: connection && (() => cut(connection)) }),
  );
  const duplicate = client.duplicate.bind(client) as (...args: unknown[]) => RedisClient;
  client.duplicate = ((...args: unknown[]) => {
    const copy = duplicate(...args);
    return watchCommandDeadlines(copy, { ...options, name: `${options.name}+` });
  }) as RedisClient["duplicate"];
  return client;
}

/**
 * Reconnects a hung connection: what waited on it fails, the client connects
 * anew. Only a connection with a socket (`connect`: waiting for its ready
 * check, `ready`) is cut. Between attempts there is nothing to cut, and while
 * one is made (`connecting`: a Sentinel client asking the sentinels for the
 * master, which may take long) a disconnect makes ioredis end the client for
 * good: its connect fails "Connection is closed" and it never reconnects (a
 * queue worker's connection, whose commands wait out an outage, then never
 * ran a task again). The attempt has its own deadlines (`connectTimeout`,
 * `sentinelCommandTimeout`).
 */
function cut(redis: Redis): void {
  if (redis.status !== "ready" && redis.status !== "connect") return;
  redis.disconnect(true);
}

/** One client's commands in flight and the timer that checks them. */
interface DeadlineWatch {
  options: DeadlineOptions;
  /** Cuts the connection; undefined on a Cluster, whose nodes are cut one by one. */
  cut: (() => void) | undefined;
  pending: Map<Command, number>;
  /**
   * When the server is expected to be done with what this connection sent so
   * far, counting the blocking commands' own waits: replies come in order,
   * so a command sent behind a blocking one starts only when that one ends.
   */
  busyUntil: number;
  reported: boolean;
  timer: NodeJS.Timeout | undefined;
  lastCheck: number;
  checkEvery: number;
}

type SendCommand = (command: Command, ...rest: unknown[]) => unknown;

function watch(
  target: Redis | Cluster,
  options: DeadlineOptions,
  { cut: cutConnection }: { cut: (() => void) | undefined },
): void {
  const w: DeadlineWatch = {
    options,
    cut: cutConnection,
    pending: new Map(),
    busyUntil: 0,
    reported: false,
    timer: undefined,
    lastCheck: 0,
    checkEvery: Math.max(50, Math.floor(options.timeoutMs / 4)),
  };
  const holder = target as unknown as { sendCommand: SendCommand };
  const send = holder.sendCommand.bind(target) as SendCommand;
  holder.sendCommand = (command, ...rest) => {
    if (givenUp.has(command)) return command.promise;
    if (!w.cut) (command as ClusterCommand).clusterOwned = true;
    // A command sent again (ioredis resends what a cut connection left unanswered) waits anew
    // from now: kept at its first deadline, a resent blocking command would be late on the new
    // connection by as long as the old one held it, cut it again, be resent again, in a loop.
    track(w, command);
    return send(command, ...rest);
  };
  target.on("ready", () => {
    if (w.reported) options.logger.info({ client: options.name }, "Redis answers again");
    w.reported = false;
  });
}

/** Gives a command just sent its deadline, and takes it off when it settles. */
function track(w: DeadlineWatch, command: Command): void {
  const waitMs = BLOCKING[command.name.toLowerCase()]?.(command.args) ?? 0;
  // Queued behind a blocking command, a command starts when that one ends: its own wait (two
  // blocking commands back to back, as BullMQ sends after a reconnect) counts from then.
  w.busyUntil = Math.max(performance.now(), w.busyUntil) + waitMs;
  const resent = w.pending.has(command);
  w.pending.set(command, w.busyUntil + w.options.timeoutMs);
  if (!w.timer) {
    w.lastCheck = performance.now();
    w.timer = setInterval(check, w.checkEvery, w).unref();
  }
  if (resent) return;
  const done = () => {
    w.pending.delete(command);
    if (w.pending.size === 0) w.busyUntil = 0;
  };
  command.promise.then(done, done);
}

/** Fails the commands past their deadline, and cuts the connection they waited on. */
function check(w: DeadlineWatch): void {
  const { pending, options } = w;
  const now = performance.now();
  // A stalled event loop has not read the replies that came meanwhile: that time is not Redis's.
  const stalled = Math.max(0, now - w.lastCheck - 2 * w.checkEvery);
  w.lastCheck = now;
  if (stalled > 0) {
    for (const [command, deadline] of pending) pending.set(command, deadline + stalled);
    w.busyUntil += stalled;
    return;
  }
  const overdue = [...pending].filter(([, deadline]) => deadline < now).map(([c]) => c);
  if (overdue.length > 0) {
    if (!w.reported) {
      w.reported = true;
      options.logger.warn(
        { client: options.name, timeoutSec: options.timeoutMs / 1000 },
        "Redis did not answer in time; reconnecting",
      );
    }
    const error = new Error(`Redis did not answer within ${options.timeoutMs / 1000} s`);
    for (const command of overdue) {
      pending.delete(command);
      if (w.cut && (command as ClusterCommand).clusterOwned) continue;
      givenUp.add(command);
      command.reject(error);
    }
    if (pending.size === 0) w.busyUntil = 0;
    w.cut?.();
  }
  if (pending.size === 0) {
    clearInterval(w.timer);
    w.timer = undefined;
  }
}

/**
 * A command a Cluster sent: on a node, the cluster's own deadline fails it
 * (its retries may go elsewhere), and the node only cuts its connection.
 */
type ClusterCommand = Command & { clusterOwned?: boolean };

/** `XREAD ... BLOCK ms ...`; without BLOCK it answers at once. */
function blockOption(args: readonly unknown[]): number {
  const at = args.findIndex((arg) => String(arg).toUpperCase() === "BLOCK");
  return at < 0 ? 0 : millis(args[at + 1]);
}

function seconds(value: unknown): number {
  return millis(Number(String(value)) * 1000);
}

/** A wait in ms; 0 (for ever) and anything unreadable are `Infinity`. */
function millis(value: unknown): number {
  const parsed = Number(String(value));
  return Number.isFinite(parsed) && parsed > 0 ? parsed : Infinity;
}
