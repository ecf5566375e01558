import { isIPv6 } from "node:net";
import type { IncomingMessage } from "node:http";
import { ServiceError } from "../errors/service-error.js";
import { isFromTrustedProxy } from "../net/client-address.js";
import type { TrustProxySetting } from "../net/trusted-proxies.js";

/** `host[:port]`: a DNS name or IPv4 address, or an IPv6 literal in brackets. */
const HOST_PORT =
  /^(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_-]{1,63})*\.?|\[([0-9A-Fa-f:.]+)\])(?::(\d{1,5}))?$/;

/** Whether `value` is a plain `host[:port]`, nothing a URL parser could read otherwise. */
export function isValidHostHeader(value: string): boolean {
  if (value.length > 255) return false;
  const match = HOST_PORT.exec(value);
  if (!match) return false;
  if (match[1] !== undefined && !isIPv6(match[1])) return false;
  return match[2] === undefined || Number(match[2]) <= 65535;
}

/** Where the origin of the URLs the service hands out comes from. */
export interface PublicOrigin {
  /** `server.publicBaseUrl`: when set, the only origin. */
  configured?: string | undefined;
  /**
   * `server.trustProxy`: `X-Forwarded-Proto` and `X-Forwarded-Host` are honoured on requests
   * whose peer is one of the proxies it names.
   */
  trustProxy: TrustProxySetting;
}

/**
 * The origin clients reach the service at, for `Location`, signed image URLs
 * and `/mcp` links: `server.publicBaseUrl` when set (behind a CDN or ingress
 * that rewrites hosts); else the request's own protocol and Host, and on a
 * request whose peer is a proxy `server.trustProxy` names, the first
 * `X-Forwarded-Proto` and `X-Forwarded-Host`; never otherwise (anyone else
 * could name any origin).
 *
 * A Host that is not a plain `host[:port]` (`a@evil.example`, a path, a bad
 * port) would put someone else's origin into the URLs handed out, so it is
 * refused, as RFC 9112 asks of a server. A request without a Host
 * (HTTP/1.0) gets the address it connected to.
 *
 * @throws ServiceError `invalid_value` naming the header at fault
 */
export function publicBaseUrl(req: IncomingMessage, origin: PublicOrigin): string {
  if (origin.configured) return origin.configured.replace(/\/+$/, "");
  const proxied = isFromTrustedProxy(req, origin.trustProxy);
  const forwardedProto = proxied ? firstValue(req.headers["x-forwarded-proto"]) : "";
  const protocol =
    forwardedProto || ((req.socket as { encrypted?: boolean }).encrypted ? "https" : "http");
  if (protocol !== "http" && protocol !== "https") {
    throw new ServiceError("invalid_value", "X-Forwarded-Proto must be http or https.", {
      param: "X-Forwarded-Proto",
    });
  }
  if (countHostLines(req) > 1) {
    throw new ServiceError("invalid_value", "The request has more than one Host header.", {
      param: "Host",
    });
  }
  const forwardedHost = proxied ? firstValue(req.headers["x-forwarded-host"]) : "";
  const host = forwardedHost || req.headers.host;
  if (host === undefined || host === "") return `${protocol}://${localAddress(req)}`;
  if (!isValidHostHeader(host)) {
    const header = forwardedHost ? "X-Forwarded-Host" : "Host";
    throw new ServiceError("invalid_value", `The ${header} header must be a host[:port].`, {
      param: header,
    });
  }
  return `${protocol}://${host.toLowerCase()}`;
}

/** The first of a comma-separated header's values, trimmed; "" when absent. */
function firstValue(value: string | string[] | undefined): string {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return "";
  const comma = text.indexOf(",");
  return (comma === -1 ? text : text.slice(0, comma)).trim();
}

function countHostLines(req: IncomingMessage): number {
  let count = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i]?.toLowerCase() === "host") count += 1;
  }
  return count;
}

function localAddress(req: IncomingMessage): string {
  const address = req.socket.localAddress ?? "127.0.0.1";
  const host = address.includes(":") ? `[${address}]` : address;
  return `${host}:${req.socket.localPort ?? 80}`;
}
