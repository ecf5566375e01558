import type { IncomingMessage } from "node:http";
import { ServiceError } from "../errors/service-error.js";

/** How long a request body may take to arrive. */
export interface BodyTiming {
  /** The whole body, from the start of reading, in ms (`server.bodyTimeoutSec`). */
  timeoutMs: number;
  /**
   * Time the client may send nothing while the service waits for more, in ms
   * (`server.bodyIdleSec`). Default {@link DEFAULT_BODY_IDLE_MS}.
   */
  idleMs?: number;
}

/** `server.bodyIdleSec`'s default, as nginx's `client_body_timeout`. */
const DEFAULT_BODY_IDLE_MS = 60_000;

/** A 408 for a body that did not arrive in time (the connection is closed after it). */
function bodyTimedOut(timeoutMs: number): ServiceError {
  return new ServiceError(
    "request_timeout",
    `The request body did not arrive within ${Math.round(timeoutMs / 1000)} s.`,
  );
}

/** A 408 for a body that stopped arriving. */
function bodyWentSilent(idleMs: number): ServiceError {
  return new ServiceError(
    "request_timeout",
    `The request body sent nothing for ${Math.round(idleMs / 1000)} s.`,
  );
}

/** A body being read, and what to do when its time is up. */
interface Watched {
  req: IncomingMessage;
  deadline: number;
  timeoutMs: number;
  idleMs: number;
  /** The connection's bytes read at the last sweep that saw some arrive. */
  bytes: number;
  /** When bytes last arrived (or the service last held some unread). */
  heard: number;
  expire: (err: ServiceError) => void;
}

const watched = new Set<Watched>();
let sweeper: NodeJS.Timeout | undefined;
let lastSweep = 0;
/** How often bodies are checked: a body is cut at most this late. */
const SWEEP_MS = 250;

/**
 * Watches a request body being read, for every reader alike (JSON, forms
 * spooled or streamed to a channel, multipart edits): `expire` gets a 408
 * `request_timeout` once the whole body took `timeoutMs`, or once the client
 * sent nothing for `idleMs` while the service was waiting for it, whichever
 * comes first; the returned function stops watching.
 *
 * Silence is read from the connection (`socket.bytesRead`), never from the
 * stream, so watching does not change how a reader consumes it; bytes the
 * service holds unread (a reader that paused for a slow channel) count as
 * heard, so only the client's silence is cut, never the service's own
 * backpressure. One shared timer checks every body, instead of a timer per
 * request (which costs more than the rest of a small body's read).
 */
export function watchBody(
  req: IncomingMessage,
  timing: BodyTiming,
  expire: (err: ServiceError) => void,
): () => void {
  const now = performance.now();
  const entry: Watched = {
    req,
    deadline: now + timing.timeoutMs,
    timeoutMs: timing.timeoutMs,
    idleMs: timing.idleMs ?? DEFAULT_BODY_IDLE_MS,
    bytes: req.socket?.bytesRead ?? 0,
    heard: now,
    expire,
  };
  watched.add(entry);
  if (!sweeper) {
    lastSweep = now;
    sweeper = setInterval(sweep, SWEEP_MS).unref();
  }
  return () => watched.delete(entry);
}

function sweep(): void {
  const now = performance.now();
  // A stalled event loop has not read what arrived meanwhile: that time is nobody's silence.
  const stalled = now - lastSweep > 4 * SWEEP_MS;
  lastSweep = now;
  for (const entry of watched) {
    if (now >= entry.deadline) {
      watched.delete(entry);
      entry.expire(bodyTimedOut(entry.timeoutMs));
      continue;
    }
    const bytes = entry.req.socket?.bytesRead ?? entry.bytes;
    if (stalled || bytes !== entry.bytes || entry.req.readableLength > 0) {
      entry.bytes = bytes;
      entry.heard = now;
    } else if (now - entry.heard >= entry.idleMs) {
      watched.delete(entry);
      entry.expire(bodyWentSilent(entry.idleMs));
    }
  }
  if (watched.size === 0) {
    clearInterval(sweeper);
    sweeper = undefined;
  }
}
