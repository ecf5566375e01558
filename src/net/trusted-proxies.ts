import { BlockList, isIPv4, isIPv6 } from "node:net";

/**
 * `server.trustProxy` as configured: `false` (no proxy), `true` (loopback and
 * private networks) or the proxies' addresses and CIDRs.
 */
export type TrustProxySetting = boolean | readonly string[];

/** Which peers are proxies whose `X-Forwarded-*` headers are read. */
export interface TrustedProxies {
  /** Whether any peer at all is trusted (`trustProxy` is not `false` or empty). */
  readonly any: boolean;
  /** Whether `address` (an IP address as text) is one of the trusted proxies. */
  trusts(address: string): boolean;
}

/**
 * What `trustProxy: true` means: loopback, and the private networks a proxy in
 * front of the service lives on (RFC 1918, carrier-grade NAT, IPv6 unique
 * local), never the public internet.
 */
export const LOOPBACK_AND_PRIVATE: readonly string[] = [
  "127.0.0.0/8",
  "::1/128",
  "10.0.0.0/8",
  "172.16.0.0/12",
  "192.168.0.0/16",
  "100.64.0.0/10",
  "fc00::/7",
];

const NONE: TrustedProxies = { any: false, trusts: () => false };

/** An address (`10.0.0.7`, `2001:db8::1`) or a CIDR (`10.0.0.0/8`, `2001:db8::/32`), parsed. */
function parseEntry(
  entry: string,
): { address: string; prefix: number; family: "ipv4" | "ipv6" } | undefined {
  const text = entry.trim();
  const slash = text.indexOf("/");
  const address = slash === -1 ? text : text.slice(0, slash);
  const family = isIPv4(address) ? "ipv4" : isIPv6(address) ? "ipv6" : undefined;
  if (!family) return undefined;
  const max = family === "ipv4" ? 32 : 128;
  if (slash === -1) return { address, prefix: max, family };
  const prefixText = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > max) return undefined;
  return { address, prefix: Number(prefixText), family };
}

/** Why `entry` is not an address or CIDR `trustProxy` can list, or `undefined` when it is one. */
export function trustProxyEntryProblem(entry: string): string | undefined {
  return parseEntry(entry)
    ? undefined
    : `"${entry.slice(0, 60)}" is not an IP address or CIDR (such as 10.0.0.0/8)`;
}

/** Compiled lists, one per configured array: a request costs a lookup, not a parse. */
const compiled = new WeakMap<readonly string[], TrustedProxies>();
let loopbackAndPrivate: TrustedProxies | undefined;

/**
 * The proxies a `trustProxy` setting names. Entries that do not parse are
 * skipped (the configuration refuses them first).
 */
export function trustedProxiesOf(setting: TrustProxySetting): TrustedProxies {
  if (setting === false) return NONE;
  if (setting === true) return (loopbackAndPrivate ??= compile(LOOPBACK_AND_PRIVATE));
  let found = compiled.get(setting);
  if (!found) {
    found = compile(setting);
    compiled.set(setting, found);
  }
  return found;
}

function compile(entries: readonly string[]): TrustedProxies {
  const list = new BlockList();
  let any = false;
  for (const entry of entries) {
    const parsed = parseEntry(entry);
    if (!parsed) continue;
    list.addSubnet(parsed.address, parsed.prefix, parsed.family);
    any = true;
  }
  if (!any) return NONE;
  return {
    any,
    trusts(address) {
      if (isIPv4(address)) return list.check(address, "ipv4");
      return isIPv6(address) && list.check(address, "ipv6");
    },
  };
}
