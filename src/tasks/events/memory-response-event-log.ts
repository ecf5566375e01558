import type { LoggedEvent, ResponseEventLog } from "../core/response-state.js";
import { createAppendListeners } from "./local-append-listeners.js";

/** Bounds of {@link createMemoryResponseEventLog}. */
export interface MemoryEventLogLimits {
  /** Events one response's log takes at most (a final event is taken even then). */
  maxEventsPerResponse: number;
  /** Characters of all logs together at most: past it the oldest logs go first. */
  maxTotalChars: number;
  /** How long a log lives after its last append, when nothing set its expiry. */
  idleTtlMs: number;
}

/** One response's log. */
interface Log {
  events: Array<{ type: string; json: string }>;
  chars: number;
  expiresAt: number;
}

/**
 * The event log of the embedded stores (memory, SQLite): in this process,
 * which is the only one, bounded by count per response and by size in all
 * (the oldest logs go first), each dropped once its TTL passed. Lost with the
 * process, like the streams reading it.
 */
export function createMemoryResponseEventLog(
  limits: MemoryEventLogLimits,
  now: () => number = Date.now,
): ResponseEventLog {
  const logs = new Map<string, Log>();
  const listeners = createAppendListeners();
  let total = 0;

  const drop = (id: string) => {
    const log = logs.get(id);
    if (!log) return;
    total -= log.chars;
    logs.delete(id);
  };
  /** The log of `id` while it lives. */
  const live = (id: string): Log | undefined => {
    const log = logs.get(id);
    if (log && log.expiresAt <= now()) {
      drop(id);
      return undefined;
    }
    return log;
  };
  /**
   * Drops expired logs from the oldest on, and the oldest while over the size
   * bound; never `keep`, the one just written.
   */
  const prune = (keep: string) => {
    for (const [id, log] of logs) {
      if (id === keep || (log.expiresAt > now() && total <= limits.maxTotalChars)) break;
      drop(id);
    }
  };

  return {
    async append(id, events, options = {}) {
      let log = live(id);
      if (!log) {
        log = { events: [], chars: 0, expiresAt: 0 };
        logs.set(id, log);
      }
      if (!options.final && log.events.length + events.length > limits.maxEventsPerResponse) {
        return undefined;
      }
      const first = log.events.length;
      for (const event of events) {
        log.events.push(event);
        const chars = event.type.length + event.json.length;
        log.chars += chars;
        total += chars;
      }
      log.expiresAt = Math.max(log.expiresAt, now() + limits.idleTtlMs);
      // The newest log is never the one pruned for size while another is older.
      logs.delete(id);
      logs.set(id, log);
      prune(id);
      listeners.notify(id);
      return first;
    },
    async read(id, after, limit): Promise<LoggedEvent[]> {
      const log = live(id);
      if (!log) return [];
      const from = Math.max(0, after + 1);
      return log.events
        .slice(from, from + limit)
        .map((event, index) => ({ seq: from + index, ...event }));
    },
    async expire(id, ttlMs) {
      const log = live(id);
      if (log) log.expiresAt = now() + ttlMs;
    },
    async delete(id) {
      drop(id);
    },
    onAppend: listeners.add,
    // Every append is this process's: the listeners wake followers at once.
    pollMs: 1_000,
  };
}
