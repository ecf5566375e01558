import type { IncomingMessage } from "node:http";
import { isIPv4, isIPv6 } from "node:net";
import { parseIPv6 } from "./ip-address.js";
import { trustedProxiesOf, type TrustProxySetting } from "./trusted-proxies.js";

/** `::ffff:a.b.c.d` (an IPv4 client on a dual-stack socket) as `a.b.c.d`; "" when unknown. */
export function plainAddress(address: string | undefined): string {
  if (!address) return "";
  return address.startsWith("::ffff:") && isIPv4(address.slice(7)) ? address.slice(7) : address;
}

/**
 * An `X-Forwarded-For` entry as an address: bare, or with a port as some
 * proxies write it (`203.0.113.7:41234`, `[2001:db8::1]:41234`); `undefined`
 * for anything else.
 */
function forwardedEntry(entry: string): string | undefined {
  const text = entry.trim();
  if (isIPv4(text) || isIPv6(text)) return plainAddress(text);
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(text);
  if (v4 && isIPv4(v4[1] as string)) return v4[1];
  const v6 = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(text);
  if (v6 && isIPv6(v6[1] as string)) return plainAddress(v6[1]);
  return undefined;
}

/**
 * Whether the request's peer (the socket's other end) is a proxy `trustProxy`
 * names: only then are its `X-Forwarded-*` headers read at all.
 */
export function isFromTrustedProxy(req: IncomingMessage, trustProxy: TrustProxySetting): boolean {
  const proxies = trustedProxiesOf(trustProxy);
  return proxies.any && proxies.trusts(plainAddress(req.socket?.remoteAddress));
}

/**
 * The address a request comes from. The socket's peer, unless that peer is a
 * proxy `trustProxy` names; then `X-Forwarded-For` is read from the right,
 * each entry the address the hop before appended, skipping the trusted hops:
 * the first untrusted entry is the client (entries further left are whatever
 * the client sent, so a client could name any address there). Every entry
 * trusted: the leftmost. An entry that is not an address ends the walk at the
 * hop that passed it on. `peer` is the socket's, when the caller has it
 * already (it is read from the socket, through Node, each time otherwise).
 */
export function clientAddressOf(
  req: IncomingMessage,
  trustProxy: TrustProxySetting,
  peer: string = plainAddress(req.socket?.remoteAddress),
): string {
  const proxies = trustedProxiesOf(trustProxy);
  if (!proxies.any || !proxies.trusts(peer)) return peer;
  const header = req.headers["x-forwarded-for"];
  const joined = Array.isArray(header) ? header.join(",") : header;
  if (!joined) return peer;
  const entries = joined.split(",");
  let client = peer;
  for (let i = entries.length - 1; i >= 0; i -= 1) {
    const entry = forwardedEntry(entries[i] as string);
    if (!entry) return client;
    client = entry;
    if (!proxies.trusts(entry)) return client;
  }
  return client;
}

/**
 * What a per-client bound counts under: an IPv4 address itself, an IPv6
 * address by its /64 (one subscriber usually has a whole /64, so counting
 * single IPv6 addresses would bound nothing).
 */
export function clientKeyOf(address: string): string {
  if (!address.includes(":")) return address;
  const bytes = parseIPv6(address);
  if (!bytes) return address;
  return `${Buffer.from(bytes.subarray(0, 8)).toString("hex")}::/64`;
}
