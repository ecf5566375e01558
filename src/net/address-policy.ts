import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { promisify } from "node:util";
import { classifyAddress, isIpLiteral, type ForbiddenAddressReason } from "./ip-address.js";

/** Which addresses a URL chosen by someone else (a channel, a client) may reach. */
export interface AddressPolicy {
  /**
   * Also allow loopback, private (RFC 1918, unique local, CGNAT), link-local
   * and reserved addresses. Cloud metadata endpoints and multicast stay
   * refused either way. Default false.
   */
  allowPrivateNetworks?: boolean;
}

/** What `allowPrivateNetworks` lets through; metadata and multicast never pass. */
const ALLOWED_WITH_PRIVATE_NETWORKS = new Set<ForbiddenAddressReason>([
  "loopback",
  "private",
  "link-local",
  "unspecified",
  "reserved",
]);

/** The one error every refusal of an address or URL raises. */
export class ForbiddenAddressError extends Error {
  /** A system-error-like code, so it reads like ECONNREFUSED where fetch wraps it in `cause`. */
  readonly code = "ERR_FORBIDDEN_ADDRESS";

  constructor(
    message: string,
    readonly reason: ForbiddenAddressReason | "scheme",
  ) {
    super(message);
    this.name = "ForbiddenAddressError";
  }
}

/** DNS lookup with every address, as `dns.lookup(host, {all: true})` gives it. */
export type LookupAll = (hostname: string) => Promise<LookupAddress[]>;

const lookupAll: LookupAll = (hostname) =>
  promisify(dnsLookup)(hostname, { all: true, verbatim: true });

/**
 * Why `ip` may not be reached under `policy`, or `undefined` if it may.
 * Pure: the whole table lives in {@link classifyAddress}.
 */
export function refusedAddressReason(
  ip: string,
  policy: AddressPolicy = {},
): ForbiddenAddressReason | undefined {
  const reason = classifyAddress(ip);
  if (reason && policy.allowPrivateNetworks && ALLOWED_WITH_PRIVATE_NETWORKS.has(reason)) {
    return undefined;
  }
  return reason;
}

/**
 * Throws when `url` is not http(s) or its host is an IP literal the policy
 * refuses. URL parsing has already turned `2130706433`, `0x7f.1` or `0177.0.0.1`
 * into `127.0.0.1`, so every spelling of an address is judged alike. Host
 * names pass here: they are judged by what they resolve to, when connecting
 * (see `createGuardedAgent`), so a DNS answer that changes cannot get round it.
 */
export function assertUrlAllowed(url: URL, policy: AddressPolicy = {}): void {
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ForbiddenAddressError(`${url.protocol} URLs are not fetched.`, "scheme");
  }
  if (isIpLiteral(url.hostname)) assertAddressAllowed(url.hostname, url.hostname, policy);
}

/**
 * {@link assertUrlAllowed}, then resolves a host name and throws when any of its
 * addresses is refused: for a check when a URL is accepted (a webhook at
 * submission), ahead of the guard that repeats it at every connect.
 */
export async function assertUrlResolvesAllowed(
  url: URL,
  policy: AddressPolicy = {},
  lookup: LookupAll = lookupAll,
): Promise<void> {
  assertUrlAllowed(url, policy);
  if (isIpLiteral(url.hostname)) return;
  for (const { address } of await lookup(url.hostname)) {
    assertAddressAllowed(url.hostname, address, policy);
  }
}

/** Throws {@link ForbiddenAddressError} when `address` (what `host` resolved to) is refused. */
export function assertAddressAllowed(host: string, address: string, policy: AddressPolicy): void {
  const reason = refusedAddressReason(address, policy);
  if (reason === undefined) return;
  const what = host === address ? address : `${host} (${address})`;
  throw new ForbiddenAddressError(`${what} is a ${reason} address.`, reason);
}
