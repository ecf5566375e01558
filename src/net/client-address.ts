import type { IncomingMessage } from "node:http";
import { isIPv4, isIPv6 } from "node:net";
import { parseIPv6 } from "./ip-address.js";

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
 * The address a request comes from. Without `trustProxy`, the socket's peer.
 * With it, the address the nearest proxy names: the last `X-Forwarded-For`
 * entry, the one that proxy appended (the entries before it are whatever
 * the client sent, so a client could name any address there); the peer when
 * there is none or it is not an address.
 */
export function clientAddressOf(req: IncomingMessage, trustProxy: boolean): string {
  if (trustProxy) {
    const header = req.headers["x-forwarded-for"];
    const joined = Array.isArray(header) ? header.join(",") : header;
    if (joined) {
      const forwarded = forwardedEntry(joined.slice(joined.lastIndexOf(",") + 1));
      if (forwarded) return forwarded;
    }
  }
  return plainAddress(req.socket?.remoteAddress);
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
