import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from "node:dns";
import type { LookupFunction } from "node:net";
import { Agent, buildConnector } from "undici";
import { assertAddressAllowed, type AddressPolicy } from "./address-policy.js";
import { isIpLiteral } from "./ip-address.js";

/** Options of {@link createGuardedAgent}. */
export interface GuardedAgentOptions extends AddressPolicy {
  /** Timeouts and pooling of the undici Agent; `connect` is the guard's own. */
  agent?: Omit<Agent.Options, "connect">;
  /** The DNS lookup to guard; default `node:dns` `lookup`. Tests pass one to fake DNS. */
  lookup?: typeof dnsLookup;
}

/**
 * An undici dispatcher that connects only to addresses the policy allows. The
 * check runs inside the socket's own DNS lookup, on every address it returns,
 * so the address judged is the address connected to: a name that resolved
 * to a public address when a URL was checked and to 127.0.0.1 now (DNS
 * rebinding) is refused. IP literals, which skip the lookup, are checked
 * before connecting, and every socket's peer address once more after it.
 * Redirects are the caller's business: fetch with `redirect: "manual"`.
 */
export function createGuardedAgent(options: GuardedAgentOptions = {}): Agent {
  const policy: AddressPolicy = { allowPrivateNetworks: options.allowPrivateNetworks };
  const lookup = options.lookup ?? dnsLookup;

  const guardedLookup = ((hostname: string, lookupOptions: LookupOptions, callback) => {
    lookup(hostname, { ...lookupOptions, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, "", 0);
      try {
        for (const { address } of addresses) assertAddressAllowed(hostname, address, policy);
      } catch (refusal) {
        return callback(refusal as Error, "", 0);
      }
      if (lookupOptions.all) return (callback as AllCallback)(null, addresses);
      const first = addresses[0];
      if (!first)
        return callback(Object.assign(new Error("no address"), { code: "ENOTFOUND" }), "", 0);
      callback(null, first.address, first.family);
    });
  }) as LookupFunction;

  const connect = buildConnector({ lookup: guardedLookup });
  return new Agent({
    ...options.agent,
    connect(connectOptions, callback) {
      const host = connectOptions.hostname.replace(/^\[|\]$/g, "");
      try {
        if (isIpLiteral(host)) assertAddressAllowed(host, host, policy);
      } catch (refusal) {
        return callback(refusal as Error, null);
      }
      connect(connectOptions, (err, socket) => {
        if (err || !socket) return callback(err ?? new Error("no socket"), null);
        try {
          assertAddressAllowed(host, socket.remoteAddress ?? "", policy);
        } catch (refusal) {
          socket.destroy();
          return callback(refusal as Error, null);
        }
        callback(null, socket);
      });
    },
  });
}

type AllCallback = (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void;
