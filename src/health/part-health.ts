/** A part's state as the last check found it: `"ok"`, or why it is not. */
export type PartStatus = "ok" | string;

/** Options of {@link createPartHealth}. */
export interface PartHealthOptions {
  /** Resolves when the part works; rejects when it does not. Aborted after `timeoutMs`. */
  probe(signal: AbortSignal): Promise<void>;
  /** Why a probe failed, in a few words a person reads on `/readyz` (never a secret). */
  reasonOf(err: unknown): string;
  /** How often the part is probed while it works. */
  intervalMs: number;
  /** How often while it does not: it is back in about this once it is back. */
  retryMs: number;
  /** Longest one probe may take: past it the part counts as not answering. */
  timeoutMs: number;
  /**
   * A probe that misses `timeoutMs` while the part worked counts only once the next, `retryMs`
   * later, has failed too: for a probe of several requests (an S3 check), whose one missed
   * deadline is as likely the service's own host starved of CPU as the part gone. A part that
   * answers with an error counts as failing at once either way, and so does a miss while the
   * part is not started (no next probe would come). Default: false.
   */
  confirmMissedDeadline?: boolean;
  /** Told when the state changes (ok to failing, failing to ok), and after the first check. */
  onChange?(status: PartStatus, previous: PartStatus | undefined): void;
  /** The state before any probe (what start-up's own check found). Default: unknown. */
  initial?: PartStatus;
}

/**
 * What the service knows of one part the tasks need (the task store, the
 * image store): the last check's result, cheap to read on every submission
 * and on every `/readyz`, kept fresh by a periodic probe and by failures the
 * real operations meet ({@link PartHealth.failed}). Nothing a caller does
 * probes more often than `retryMs`.
 */
export interface PartHealth {
  /** The last check's result; `undefined` before the first. */
  current(): PartStatus | undefined;
  /** Whether the part may be used: it worked at the last check (or was never checked). */
  available(): boolean;
  /**
   * Probes now (one probe at a time: callers meanwhile share it) and resolves the part's state
   * after it: what it found, except that a first missed deadline may leave a working part
   * working until the next probe (see {@link PartHealthOptions.confirmMissedDeadline}).
   */
  refresh(): Promise<PartStatus>;
  /**
   * A real operation failed: probe now when the part was thought to work
   * (at most once per `retryMs`); one known to fail is probed every
   * `retryMs` already.
   */
  failed(): void;
  /** Starts the periodic probe. */
  start(): void;
  stop(): void;
}

/** Builds a {@link PartHealth}; nothing runs until {@link PartHealth.start} or a refresh. */
export function createPartHealth(options: PartHealthOptions): PartHealth {
  let status: PartStatus | undefined = options.initial;
  let running: Promise<PartStatus> | undefined;
  let timer: NodeJS.Timeout | undefined;
  /** When the timer fires (ms since the epoch), while it is set. */
  let timerAt = Infinity;
  let lastProbeEnd = -Infinity;
  let started = false;

  const set = (next: PartStatus) => {
    const previous = status;
    status = next;
    if (previous !== next) options.onChange?.(next, previous);
  };
  const scheduleIn = (ms: number) => {
    if (!started) return;
    clearTimeout(timer);
    timerAt = Date.now() + ms;
    timer = setTimeout(() => {
      timerAt = Infinity;
      void refresh();
    }, ms);
    timer.unref();
  };
  const schedule = () =>
    scheduleIn(status === "ok" || status === undefined ? options.intervalMs : options.retryMs);
  /** A probe missed its deadline while the part worked: the next, `retryMs` on, decides. */
  let suspect = false;
  const refresh = (): Promise<PartStatus> => {
    running ??= probeOnce(options).then(({ found, timedOut }) => {
      running = undefined;
      lastProbeEnd = Date.now();
      // Only a started part has a next probe coming to confirm the miss; one that is not counts it.
      if (timedOut && options.confirmMissedDeadline && status === "ok" && !suspect && started) {
        suspect = true;
        scheduleIn(options.retryMs);
        return status;
      }
      suspect = false;
      set(found);
      schedule();
      return found;
    });
    return running;
  };

  return {
    current: () => status,
    available: () => status === undefined || status === "ok",
    refresh,
    failed() {
      // A suspect part is probed again within `retryMs` already.
      if (running || suspect || (status !== undefined && status !== "ok")) return;
      const wait = lastProbeEnd + options.retryMs - Date.now();
      if (wait <= 0) void refresh();
      // Probed a moment ago: again once `retryMs` has passed since, not at every failure.
      else if (timerAt > Date.now() + wait) scheduleIn(wait);
    },
    start() {
      started = true;
      schedule();
    },
    stop() {
      started = false;
      clearTimeout(timer);
      timerAt = Infinity;
      // Its confirming probe is cancelled: a failure after a restart must probe, not wait for it.
      suspect = false;
    },
  };
}

/** One probe under its deadline, and whether it missed the deadline; never rejects. */
async function probeOnce(
  options: PartHealthOptions,
): Promise<{ found: PartStatus; timedOut: boolean }> {
  const signal = AbortSignal.timeout(options.timeoutMs);
  let deadline: NodeJS.Timeout | undefined;
  // A probe that ignores its signal still ends at the deadline.
  const late = new Promise<never>((_, reject) => {
    deadline = setTimeout(
      () => reject(new Error(`no answer within ${options.timeoutMs / 1000} s`)),
      options.timeoutMs,
    );
  });
  try {
    await Promise.race([options.probe(signal), late]);
    return { found: "ok", timedOut: false };
  } catch (err) {
    return signal.aborted
      ? { found: `no answer within ${options.timeoutMs / 1000} s`, timedOut: true }
      : { found: options.reasonOf(err), timedOut: false };
  } finally {
    clearTimeout(deadline);
  }
}
