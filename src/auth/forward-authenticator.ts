import type { Logger } from "pino";
import type { Channel } from "../channels/channel.js";
import type { ChannelClient } from "../channels/channel-client.js";
import type { Config } from "../config/config-schema.js";
import { ServiceError } from "../errors/service-error.js";
import { hashSecret, keyFingerprint } from "./static-keys.js";
import { checkGatewayKey, type GatewayVerdict } from "./check-gateway-key.js";
import { clientKeyOf } from "../net/client-address.js";
import {
  createCheckLimiter,
  createClientCheckLimiter,
  type CheckLimiter,
  type ClientCheckLimiter,
} from "./check-limiter.js";
import { FORWARD_GROUP, type GatewayModels, type Principal } from "./principal.js";
import { TtlMap } from "../collections/ttl-map.js";
import { UpstreamCredential } from "./upstream-credential.js";

/** `auth.forward`, defaults filled in. */
export type ForwardConfig = NonNullable<Config["auth"]["forward"]>;

/**
 * Resolves a bearer key to a forward principal, `undefined` when the gateway
 * refuses it. `client` is the address the request came from (see
 * `clientAddressOf`): new keys are checked within a share per address.
 * @throws ServiceError `upstream_unavailable` (502) when the gateway cannot say,
 *   (503) when the checks of new keys in all are at their bound; `rate_limited`
 *   (429) when the client's address is at its share of them; `upstream_rate_limited`
 *   (429) when the gateway rate-limits the check
 */
export type ForwardAuthenticate = (key: string, client?: string) => Promise<Principal | undefined>;

/** Dependencies of {@link createForwardAuthenticator}. */
export interface ForwardAuthenticatorDeps {
  /** The gateway: `auth.forward.channel`. */
  channel: Channel;
  options: Pick<
    ForwardConfig,
    | "cacheSec"
    | "refusalCacheSec"
    | "timeoutSec"
    | "maxCachedKeys"
    | "maxChecksInFlight"
    | "maxChecksPerSec"
    | "maxChecksInFlightPerClient"
    | "maxChecksPerClientPerSec"
  >;
  /** Keyed hash of a key, hex (`createKeyHasher`): cache key and owner id. */
  hashKey: (key: string) => Promise<string>;
  logger: Logger;
  /** Makes the call to the gateway. */
  client: ChannelClient;
  /** Injected so tests can move the clock; default `Date.now`. */
  now?: () => number;
}

/**
 * How long a key the gateway accepted stays known after its cache entry
 * expired: its next checks skip the bounds that new keys wait for.
 */
const KNOWN_KEY_MS = 24 * 60 * 60 * 1000;

/** What is kept per key: no usable key, only its hash and what the gateway said. */
type CachedVerdict = { kind: "accepted"; models: GatewayModels } | { kind: "refused" };

/**
 * Bearer keys that are neither configured nor JWTs, checked against the
 * gateway (`GET /models` with the key itself):
 *
 * - an accepted key and its model list are reused for `cacheSec`, a refused
 *   one (401/403) is refused without asking for `refusalCacheSec`, so a flood
 *   of one bad key is one gateway call per period; both caches are LRU-bounded
 *   at `maxCachedKeys` and keyed by the key's HMAC, never the key;
 * - concurrent checks of one key share one gateway call;
 * - keys never accepted before are checked at most `maxChecksInFlight` at
 *   once and `maxChecksPerSec` a second, and from one client address at most
 *   `maxChecksInFlightPerClient` at once and `maxChecksPerClientPerSec` a
 *   second; beyond the bounds in all they get 503 `upstream_unavailable`,
 *   beyond the address's share 429 `rate_limited` (the client's own doing),
 *   both with `Retry-After` at once, so made-up keys sent as fast as an
 *   attacker likes never become a flood at the gateway, and one address
 *   sending them leaves the rest of the checks to everyone else. A key
 *   the gateway accepted in the last day is re-checked outside these bounds:
 *   real users keep working during such a flood;
 * - a gateway that cannot say (down, timeout, 5xx, garbage) is 502
 *   `upstream_unavailable` for this request only, never a 401 and never cached.
 *
 * The key itself is sent to the gateway and put on the principal (hidden in an
 * {@link UpstreamCredential}), never logged or kept in a cache.
 */
export function createForwardAuthenticator(deps: ForwardAuthenticatorDeps): ForwardAuthenticate {
  const { channel, options, logger } = deps;
  const now = deps.now ?? Date.now;
  const limiter = createCheckLimiter({
    maxConcurrent: options.maxChecksInFlight,
    perSecond: options.maxChecksPerSec,
    now,
  });
  const s: ForwardState = {
    deps,
    accepted: new TtlMap<GatewayModels>(options.maxCachedKeys, { order: "use", now }),
    // Apart from the accepted keys: random bad keys must not push good ones out.
    refused: new TtlMap<true>(options.maxCachedKeys, { order: "use", now }),
    inFlight: new Map(),
    lists: createListInterner(Math.min(options.maxCachedKeys, 1000)),
    // Only keys the gateway accepted get in here, so made-up keys cannot fill it.
    known: new TtlMap<true>(options.maxCachedKeys, { order: "use", now }),
    limiter,
    clients: createClientCheckLimiter({
      maxConcurrent: options.maxChecksInFlightPerClient,
      perSecond: options.maxChecksPerClientPerSec,
      maxClients: options.maxCachedKeys,
      now,
    }),
    shed: createShedder(logger, channel.name, now),
  };
  return (key, client) => authenticate(s, key, clientKeyOf(client ?? ""));
}

/** What the authenticator keeps between requests. */
interface ForwardState {
  deps: ForwardAuthenticatorDeps;
  accepted: TtlMap<GatewayModels>;
  refused: TtlMap<true>;
  /** Checks under way, by key hash: concurrent requests with one key share one. */
  inFlight: Map<string, Promise<CachedVerdict>>;
  lists: ReturnType<typeof createListInterner>;
  known: TtlMap<true>;
  limiter: CheckLimiter;
  /** The same bounds, per client address. */
  clients: ClientCheckLimiter;
  shed: (retryAfter: number, which: "all" | "client") => ServiceError;
}

/** {@link ForwardAuthenticate}: the caches, else one gateway check (shared, bounded). */
async function authenticate(
  s: ForwardState,
  key: string,
  client: string,
): Promise<Principal | undefined> {
  const { deps, inFlight } = s;
  // What a gateway could take as a bearer at all; anything else is not worth a call.
  if (!/^[\x21-\x7e]{1,1024}$/.test(key)) return undefined;
  const hash = await deps.hashKey(key);
  let verdict: CachedVerdict | undefined;
  const models = s.accepted.get(hash);
  if (models) verdict = { kind: "accepted", models };
  else if (s.refused.get(hash)) verdict = { kind: "refused" };
  else {
    let pending = inFlight.get(hash);
    if (!pending) {
      const release = s.known.get(hash) ? () => {} : acquireCheck(s, client);
      pending = ask(s, key, hash).finally(() => {
        inFlight.delete(hash);
        release();
      });
      inFlight.set(hash, pending);
    }
    verdict = await pending;
  }
  if (verdict.kind === "refused") return undefined;
  const subject = subjectOf(hash);
  return {
    subject,
    group: FORWARD_GROUP,
    keyName: keyFingerprint(hashSecret(key)),
    upstream: {
      channel: deps.channel.name,
      credential: new UpstreamCredential(key),
      models: verdict.models,
    },
  };
}

/**
 * A place for one check of a new key, within the client's share and the
 * bounds in all; its release.
 * @throws ServiceError `rate_limited` (429) when the client's share is full,
 *   `upstream_unavailable` (503) when the bounds in all are
 */
function acquireCheck(s: ForwardState, client: string): () => void {
  const own = s.clients.tryAcquire(client);
  if (!own) throw s.shed(s.clients.retryAfterSec(client), "client");
  const shared = s.limiter.tryAcquire();
  if (!shared) {
    own();
    throw s.shed(s.limiter.retryAfterSec(), "all");
  }
  return () => {
    own();
    shared();
  };
}

/** Asks the gateway about a key and caches its verdict (not a failure to answer). */
async function ask(s: ForwardState, key: string, hash: string): Promise<CachedVerdict> {
  const { channel, options, logger } = s.deps;
  const verdict = await checkGatewayKey({
    channel,
    key,
    timeoutMs: options.timeoutSec * 1000,
    client: s.deps.client,
  });
  const subject = subjectOf(hash);
  switch (verdict.kind) {
    case "accepted": {
      const models = s.lists.intern(verdict.models);
      s.accepted.set(hash, models, options.cacheSec * 1000);
      s.known.set(hash, true, KNOWN_KEY_MS);
      logger.debug(
        { channel: channel.name, subject, models: models.list.length },
        "forward key accepted by the gateway",
      );
      return { kind: "accepted", models };
    }
    case "refused":
      s.refused.set(hash, true, options.refusalCacheSec * 1000);
      logger.debug(
        { channel: channel.name, subject, status: verdict.status },
        "forward key refused by the gateway",
      );
      return { kind: "refused" };
    default:
      throw gatewayError(verdict, logger, channel.name);
  }
}

/** Owner id of a forward key: 128 bits of its keyed hash. */
function subjectOf(hash: string): string {
  return `fwd:${hash.slice(0, 32)}`;
}

function gatewayError(
  verdict: Exclude<GatewayVerdict, { kind: "accepted" | "refused" }>,
  logger: Logger,
  channelName: string,
): ServiceError {
  if (verdict.kind === "rate_limited") {
    logger.warn({ channel: channelName }, "the gateway rate-limited a forward key check");
    return new ServiceError(
      "upstream_rate_limited",
      "The gateway is rate-limiting this API key; retry later.",
      { retryAfter: verdict.retryAfter },
    );
  }
  if (verdict.answered !== undefined) {
    // It answered: the address or the path is wrong, which waiting does not mend.
    const hint = verdict.answered === 404 ? "; does its baseUrl end in /v1?" : "";
    logger.warn(
      { channel: channelName, reason: verdict.reason },
      `the gateway answered GET /models (checking a forward key) with ${verdict.reason}${hint}`,
    );
    return new ServiceError(
      "upstream_unavailable",
      verdict.answered >= 200 && verdict.answered < 300
        ? "The gateway that checks this API key answered without a model list."
        : `The gateway that checks this API key answered HTTP ${verdict.answered} to its model list request.`,
    );
  }
  logger.warn(
    { channel: channelName, reason: verdict.reason },
    "could not check a forward key with the gateway",
  );
  return new ServiceError(
    "upstream_unavailable",
    "The gateway that checks this API key could not be reached; retry shortly.",
  );
}

/**
 * The refusal of a new key while the checks are at their bounds: 503 in all
 * (the service sheds load), 429 for an address over its own share; with the
 * time until one could start; each kind logged at most once a minute, as one
 * line per flood.
 */
function createShedder(
  logger: Logger,
  channelName: string,
  now: () => number,
): (retryAfter: number, which: "all" | "client") => ServiceError {
  const loggedAt = { all: -Infinity, client: -Infinity };
  return (retryAfter, which) => {
    if (now() - loggedAt[which] >= 60_000) {
      loggedAt[which] = now();
      logger.warn(
        { channel: channelName },
        which === "all"
          ? "forward key checks are at their bounds; new keys get 503 until they ease"
          : "a client address is at its share of forward key checks; its new keys get 429 until it eases",
      );
    }
    if (which === "client") {
      return new ServiceError(
        "rate_limited",
        "Too many new API keys from this address are being checked with the gateway right now; retry shortly.",
        { retryAfter },
      );
    }
    return new ServiceError(
      "upstream_unavailable",
      "Too many new API keys are being checked with the gateway right now; retry shortly.",
      { overloaded: true, retryAfter },
    );
  };
}

/**
 * Shares one model list among the keys that got the same one (a gateway's
 * users fall into a few groups), so the cache holds a few lists, not one per
 * key. Bounded: past `max` distinct lists the table starts over, which only
 * loses sharing.
 */
function createListInterner(max: number) {
  const table = new Map<string, GatewayModels>();
  return {
    intern(models: GatewayModels): GatewayModels {
      const signature = JSON.stringify(models.list);
      const known = table.get(signature);
      if (known) return known;
      if (table.size >= max) table.clear();
      table.set(signature, models);
      return models;
    },
  };
}
