import { createServer, type RequestListener, type Server } from "node:http";
import type { Socket } from "node:net";
import type { Logger } from "pino";
import { ServiceError } from "../errors/service-error.js";
import { clientAddressOf, clientKeyOf, plainAddress } from "../net/client-address.js";
import {
  trustedProxiesOf,
  type TrustedProxies,
  type TrustProxySetting,
} from "../net/trusted-proxies.js";
import { createClientErrorHandler } from "./create-client-error-handler.js";
import { closeAfterUnreadBody, hasBody } from "./drain-unread-body.js";
import { sendError } from "./send-error.js";
import type { BodyTiming } from "./watch-body.js";

/** What bounds every connection of a listener, whatever its routes. */
export interface ConnectionLimits {
  /** Connections open at once; past it Node closes a new one at once. */
  maxConnections: number;
  /** Per client address (see `trustProxy`); undefined: no such cap. */
  maxConnectionsPerIp?: number;
  /**
   * `server.trustProxy`: the proxies in front. A connection from one of them
   * carries many clients, so it is not counted; its requests in flight are,
   * per address `X-Forwarded-For` names (see `clientAddressOf`).
   */
  trustProxy: TrustProxySetting;
  /** Time to send a request's headers (and, on a new connection, to start). */
  headersTimeoutMs: number;
  /** Time an idle keep-alive connection waits for its next request. */
  keepAliveTimeoutMs: number;
  /** How long a body nobody reads may keep arriving (`bodyTimeoutSec`, `bodyIdleSec`). */
  body: BodyTiming;
}

/** Why a cap refused a connection (or, behind a trusted proxy, a request). */
export type RefusedBy = "max_connections" | "per_ip";

/** Options of {@link createGuardedServer}. */
export interface GuardedServerOptions {
  limits: ConnectionLimits;
  /** Told of each refusal (metrics). */
  onRefused: (by: RefusedBy) => void;
  logger: Logger;
}

/**
 * How often Node checks connections for their headers' deadline (its default
 * is 30 s, which would let a header deadline run up to twice as long).
 */
const CHECK_EVERY_MS = 1000;

/** Seconds a client refused by the per-address cap is told to wait. */
const RETRY_AFTER_SEC = 1;

/**
 * An HTTP server for `listener` whose every connection is bounded, whatever
 * route it reaches and whether or not that route reads its body: headers
 * within `headersTimeoutMs`, idle keep-alive connections closed after
 * `keepAliveTimeoutMs`, a body no route read drained within the body bounds
 * and the connection then closed ({@link closeAfterUnreadBody}),
 * `maxConnections` in all and `maxConnectionsPerIp` per client address.
 * There is no request timeout: the synchronous image routes take minutes to
 * answer, and their bodies have their own deadlines.
 */
export function createGuardedServer(
  listener: RequestListener,
  options: GuardedServerOptions,
): Server {
  const { limits, onRefused } = options;
  const server = createServer(
    { connectionsCheckingInterval: Math.min(CHECK_EVERY_MS, limits.headersTimeoutMs) },
    guardRequests(listener, options),
  );
  server.on("clientError", createClientErrorHandler());
  server.requestTimeout = 0;
  server.headersTimeout = limits.headersTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.maxConnections = limits.maxConnections;
  server.on("drop", () => onRefused("max_connections"));
  if (limits.maxConnectionsPerIp !== undefined) {
    capConnectionsPerAddress(server, limits.maxConnectionsPerIp, {
      proxies: trustedProxiesOf(limits.trustProxy),
      refused: () => onRefused("per_ip"),
    });
  }
  return server;
}

/**
 * The listener, with the unread-body bound and, on requests that come through
 * a trusted proxy, the per-address cap on requests in flight.
 */
function guardRequests(listener: RequestListener, options: GuardedServerOptions): RequestListener {
  const { limits, onRefused, logger } = options;
  const proxies = trustedProxiesOf(limits.trustProxy);
  const perAddress =
    proxies.any && limits.maxConnectionsPerIp !== undefined
      ? new AddressCounts(limits.maxConnectionsPerIp)
      : undefined;
  return (req, res) => {
    if (hasBody(req)) closeAfterUnreadBody(req, res, limits.body);
    // A direct client's connections are counted already; a proxy's requests are counted here.
    if (perAddress && proxies.trusts(plainAddress(req.socket.remoteAddress))) {
      const key = clientKeyOf(clientAddressOf(req, limits.trustProxy));
      if (!perAddress.take(key)) {
        onRefused("per_ip");
        sendError(req, res, tooManyRequests(), logger);
        return;
      }
      res.once("close", () => perAddress.release(key));
    }
    listener(req, res);
  };
}

function tooManyRequests(): ServiceError {
  return new ServiceError(
    "too_many_connections",
    "Too many requests from this address are open at once; retry when some have finished.",
    { retryAfter: RETRY_AFTER_SEC },
  );
}

/**
 * Closes at once a new connection from an address that holds `max` already,
 * before Node reads a byte of it (as Node does past `maxConnections`). A
 * trusted proxy's connections are not counted: its requests are.
 */
function capConnectionsPerAddress(
  server: Server,
  max: number,
  options: { proxies: TrustedProxies; refused: () => void },
): void {
  const { proxies, refused } = options;
  const counts = new AddressCounts(max);
  server.prependListener("connection", (socket: Socket) => {
    const address = plainAddress(socket.remoteAddress);
    if (proxies.trusts(address)) return;
    const key = clientKeyOf(address);
    if (!counts.take(key)) {
      refused();
      socket.destroy();
      return;
    }
    socket.once("close", () => counts.release(key));
  });
}

/** Counts per client key, each at most `max`; a key at 0 is forgotten. */
class AddressCounts {
  private readonly counts = new Map<string, number>();

  constructor(private readonly max: number) {}

  /** Counts one more for `key`, or false when it holds `max` already. */
  take(key: string): boolean {
    const count = this.counts.get(key) ?? 0;
    if (count >= this.max) return false;
    this.counts.set(key, count + 1);
    return true;
  }

  release(key: string): void {
    const count = (this.counts.get(key) ?? 1) - 1;
    if (count <= 0) this.counts.delete(key);
    else this.counts.set(key, count);
  }
}
