import type { Logger } from "pino";
import type { Channel } from "../channels/channel.js";
import type { ChannelClient } from "../channels/channel-client.js";
import type { Config } from "../config/config-schema.js";
import { createCredentialSealer, type CredentialSealer } from "./credential-sealer.js";
import { createForwardAuthenticator, type ForwardAuthenticate } from "./forward-authenticator.js";
import { createKeyHasher } from "./forward-secret.js";

/** Forward mode's parts, built once per service from `auth.forward`. */
export interface ForwardMode {
  /** The gateway: the channel forward keys are checked against and bound to. */
  channel: Channel;
  /** Bearer keys to forward principals (after static keys and JWTs failed). */
  authenticate: ForwardAuthenticate;
  /** Seals a forward key for the time its task is unfinished. */
  sealer: CredentialSealer;
  /** Keyed hash of a key, hex: what owner ids and caches are made from. */
  hashKey: (key: string) => Promise<string>;
}

/** Dependencies of {@link createForwardMode}. */
export interface ForwardModeDeps {
  config: Config;
  /** Every configured channel, built (the forward one is picked by name). */
  channels: readonly Channel[];
  /** The root secret (`resolveForwardSecret`), resolved at start-up. */
  secret: string;
  logger: Logger;
  /** Makes the key checks' calls to the gateway. */
  client: ChannelClient;
  now?: () => number;
}

/** Builds forward mode when `auth.forward` is set, else `undefined`. Nothing is fetched here. */
export function createForwardMode(deps: ForwardModeDeps): ForwardMode | undefined {
  const forward = deps.config.auth.forward;
  if (!forward) return undefined;
  const channel = deps.channels.find((candidate) => candidate.name === forward.channel);
  // The config schema already refused an unknown channel; this guards a caller that built its own.
  if (!channel) throw new Error(`auth.forward.channel: unknown channel "${forward.channel}"`);
  const secret = () => Promise.resolve(deps.secret);
  const hashKey = createKeyHasher(secret);
  return {
    channel,
    hashKey,
    sealer: createCredentialSealer(secret),
    authenticate: createForwardAuthenticator({
      channel,
      options: forward,
      hashKey,
      logger: deps.logger,
      client: deps.client,
      now: deps.now,
    }),
  };
}

/**
 * The channels configured keys and JWTs are routed to: all of them, except a
 * forward channel without an `apiKey` of its own, which only forward keys
 * (their own credential) can call.
 */
export function channelsForOwnKeys(
  channels: readonly Channel[],
  forwardChannel: Channel | undefined,
): Channel[] {
  return channels.filter((channel) => channel !== forwardChannel || channel.apiKey !== undefined);
}
