import type { Logger } from "pino";
import type { RedisClient } from "./redis-client.js";

/**
 * Ends a client's current connection on demand, any number of times. It is
 * given to node-redis as the socket's `signal` (a `net.connect` option that
 * node-redis passes through, for plain and TLS sockets alike), so the
 * connection ends as by a network error: node-redis fails what waited on it
 * and reconnects as it always does, and BullMQ sees an ordinary reconnect.
 * Never "aborted" itself: the next socket must not be destroyed at birth.
 */
export class ConnectionCutter extends EventTarget {
  readonly aborted = false;
  reason: unknown;
  #listeners: Listener[] = [];

  override addEventListener(...args: Parameters<EventTarget["addEventListener"]>): void {
    const [type, listener] = args;
    if (!listener) return;
    super.addEventListener(...args);
    // Each socket adds one and never takes it back; only the newest belongs to a live one.
    this.#listeners.push(listener);
    while (this.#listeners.length > 2) {
      super.removeEventListener(type, this.#listeners.shift() as Listener);
    }
  }

  throwIfAborted(): void {}

  /** Ends the current connection with `reason` (the error its waiting commands get). */
  cut(reason: Error): void {
    this.reason = reason;
    this.#listeners = [];
    this.dispatchEvent(new Event("abort"));
  }

  /** As the socket option takes it: all of an AbortSignal that `net.connect` uses. */
  asSignal(): AbortSignal {
    return this as unknown as AbortSignal;
  }
}

type Listener = NonNullable<Parameters<EventTarget["addEventListener"]>[1]>;

/**
 * Commands that wait on the server by design, and how long by their
 * arguments, in ms (`Infinity`: for ever, or unreadable).
 */
const BLOCKING: Record<string, (args: readonly unknown[]) => number> = {
  BLPOP: (args) => seconds(args.at(-1)),
  BRPOP: (args) => seconds(args.at(-1)),
  BRPOPLPUSH: (args) => seconds(args.at(-1)),
  BLMOVE: (args) => seconds(args.at(-1)),
  BZPOPMIN: (args) => seconds(args.at(-1)),
  BZPOPMAX: (args) => seconds(args.at(-1)),
  BLMPOP: (args) => seconds(args[1]),
  BZMPOP: (args) => seconds(args[1]),
  XREAD: blockOption,
  XREADGROUP: blockOption,
  WAIT: (args) => millis(args[2]),
};

/**
 * Gives every command of a node-redis client a deadline: `timeoutMs` after it
 * was sent (plus its own wait, for a blocking command; a command queued behind
 * one waits for it too). A connection that lets a command pass its deadline,
 * or takes longer than `timeoutMs` from connecting to ready, is taken as hung
 * (a paused or failing-over Redis accepts connections and never answers) and
 * cut: its waiting commands fail at once (503 `store_unavailable` on task
 * routes) and the client reconnects. An idle connection is probed by the
 * client's own PING every `timeoutMs` (`pingInterval`), so a hang is found
 * within about twice that even with no traffic.
 *
 * Duplicates (BullMQ's worker and blocking connections, the pub/sub
 * subscriber) get deadlines of their own. The client must have been created
 * with `socket.signal` set to `cutter`.
 */
export function watchCommandDeadlines(
  client: RedisClient,
  options: { cutter: ConnectionCutter; timeoutMs: number; logger: Logger; name: string },
): RedisClient {
  const { timeoutMs } = options;
  const w: DeadlineWatch = {
    client,
    options,
    pending: new Map(),
    nextId: 0,
    horizon: 0,
    connectingSince: undefined,
    reported: false,
    timer: undefined,
    lastCheck: 0,
    checkEvery: Math.max(50, Math.floor(timeoutMs / 4)),
  };

  // node-redis hands out a view of the client (`Object.create` of it) and runs every command on
  // the client itself (`_self`): the wrapper goes there, where each command passes.
  const self = (client as unknown as { _self?: RedisClient })._self ?? client;
  const send = self.sendCommand.bind(self);
  self.sendCommand = ((args, commandOptions) => {
    const promise = send(args, commandOptions);
    track(w, promise, blockingWaitMs(args));
    return promise;
  }) as RedisClient["sendCommand"];

  client.on("connect", () => {
    w.connectingSince = performance.now();
    watch(w);
  });
  client.on("ready", () => {
    w.connectingSince = undefined;
    if (w.reported) options.logger.info({ client: options.name }, "Redis answers again");
    w.reported = false;
  });

  const duplicate = client.duplicate.bind(client);
  client.duplicate = ((overrides?: Parameters<RedisClient["duplicate"]>[0]) => {
    const own = new ConnectionCutter();
    const socket = { ...client.options?.socket, ...overrides?.socket, signal: own.asSignal() };
    const copy = duplicate({ ...overrides, socket } as Parameters<
      RedisClient["duplicate"]
    >[0]) as RedisClient;
    return watchCommandDeadlines(copy, { ...options, cutter: own, name: `${options.name}+` });
  }) as RedisClient["duplicate"];
  return client;
}

/** One client's commands in flight and the timer that checks them. */
interface DeadlineWatch {
  client: RedisClient;
  options: { cutter: ConnectionCutter; timeoutMs: number; logger: Logger; name: string };
  /** Command id -> its deadline (`performance.now()` ms). */
  pending: Map<number, number>;
  nextId: number;
  /** The latest deadline of the commands waiting: replies come in order. */
  horizon: number;
  connectingSince: number | undefined;
  /** Whether the hang was logged (once, until the client is ready again). */
  reported: boolean;
  timer: NodeJS.Timeout | undefined;
  lastCheck: number;
  checkEvery: number;
}

/** Gives a command just sent its deadline, and takes it off when it settles. */
function track(w: DeadlineWatch, promise: Promise<unknown>, waitMs: number): void {
  const id = w.nextId++;
  const deadline = Math.max(performance.now() + w.options.timeoutMs + waitMs, w.horizon);
  w.horizon = deadline;
  w.pending.set(id, deadline);
  watch(w);
  const done = () => {
    w.pending.delete(id);
    if (w.pending.size === 0) w.horizon = 0;
  };
  promise.then(done, done);
}

/** Starts the check timer, unless it runs. */
function watch(w: DeadlineWatch): void {
  if (w.timer) return;
  w.lastCheck = performance.now();
  w.timer = setInterval(check, w.checkEvery, w).unref();
}

/** Cuts the connection when a command (or the connect) is past its deadline. */
function check(w: DeadlineWatch): void {
  const { pending, options } = w;
  const now = performance.now();
  // A stalled event loop has not read the replies that came meanwhile: that time is not Redis's.
  const stalled = Math.max(0, now - w.lastCheck - 2 * w.checkEvery);
  w.lastCheck = now;
  if (stalled > 0) {
    for (const [id, deadline] of pending) pending.set(id, deadline + stalled);
    w.horizon += stalled;
    if (w.connectingSince !== undefined) w.connectingSince += stalled;
    return;
  }
  const overdue =
    (w.connectingSince !== undefined && now - w.connectingSince > options.timeoutMs) ||
    [...pending.values()].some((deadline) => deadline < now);
  if (overdue) {
    w.connectingSince = undefined;
    if (!w.reported) {
      w.reported = true;
      options.logger.warn(
        { client: options.name, timeoutSec: options.timeoutMs / 1000 },
        "Redis did not answer in time; reconnecting",
      );
    }
    options.cutter.cut(new Error(`Redis did not answer within ${options.timeoutMs / 1000} s`));
  }
  if (!w.client.isOpen && pending.size === 0) {
    clearInterval(w.timer);
    w.timer = undefined;
  }
}

/** How long a command may wait on the server by its own arguments, in ms: 0 for most. */
function blockingWaitMs(args: readonly unknown[]): number {
  return BLOCKING[String(args[0]).toUpperCase()]?.(args) ?? 0;
}

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
