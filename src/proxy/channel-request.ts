import {
  Agent as HttpAgent,
  request as httpRequest,
  type ClientRequest,
  type OutgoingHttpHeaders,
} from "node:http";
import {
  Agent as HttpsAgent,
  request as httpsRequest,
  type RequestOptions as HttpsRequestOptions,
} from "node:https";
import { isIP } from "node:net";

/** One call to a channel, as {@link ChannelRequester} sends it. */
export interface ChannelRequestOptions {
  /** The channel's `/v1` base URL, no trailing slash. */
  baseUrl: string;
  /** Path (and query) after the base. */
  path: string;
  method: string;
  /** Every header to send but `Host`, which comes from the base URL. */
  headers: OutgoingHttpHeaders;
  /**
   * A connection of its own, closed after the answer. For forms: a pooled
   * connection the channel closed meanwhile would fail after part of the form
   * was sent, too late for another channel to take it.
   */
  fresh: boolean;
  /**
   * Idle time allowed without a byte either way: a stream that keeps sending
   * is never cut, a silent channel is.
   */
  timeoutMs: number;
  /** Called when the idle timeout cut the call (its request is then destroyed). */
  onTimeout: () => void;
}

/**
 * Starts a call; the caller ends the returned request (with the body or by
 * piping a stream into it) and listens for `response` and `error`.
 */
export type ChannelRequester = (options: ChannelRequestOptions) => ClientRequest;

/** What a channel's base URL says, parsed once. */
interface ChannelTarget {
  send: (options: HttpsRequestOptions) => ClientRequest;
  hostname: string;
  port: number | undefined;
  host: string;
  /** TLS server name: what the agent would derive from `Host` on every call. */
  servername: string;
  prefix: string;
  pooled: HttpAgent;
  fresh: HttpAgent;
}

/**
 * Sends calls to channels with `node:http`/`node:https` directly: one
 * keep-alive agent per channel origin (a connection per request would cost
 * a handshake each), plus one without keep-alive for forms. The passthrough
 * used http-proxy-middleware before: its URL parsing and header copies per
 * call, its event plumbing and a pipe from the request already read were a
 * third of the service's CPU per request on the bench's chat request, for
 * nothing this service used (it handled every answer itself).
 */
export function createChannelRequester(): ChannelRequester {
  /** By base URL: the configured channels' (a forward key's channel shares its gateway's). */
  const targets = new Map<string, ChannelTarget>();
  const targetOf = (baseUrl: string): ChannelTarget => {
    let target = targets.get(baseUrl);
    if (target) return target;
    const url = new URL(baseUrl);
    const secure = url.protocol === "https:";
    const Agent = secure ? HttpsAgent : HttpAgent;
    // `[::1]` is the URL's spelling; the socket wants the bare address.
    const hostname = url.hostname.replace(/^\[(.*)\]$/, "$1");
    target = {
      send: secure ? httpsRequest : httpRequest,
      hostname,
      port: url.port === "" ? undefined : Number(url.port),
      host: url.host,
      // No SNI for an address, as Node itself decides.
      servername: isIP(hostname) ? "" : hostname,
      prefix: url.pathname.replace(/\/+$/, ""),
      pooled: new Agent({ keepAlive: true }),
      fresh: new Agent({ keepAlive: false }),
    };
    targets.set(baseUrl, target);
    return target;
  };

  return (options) => {
    const target = targetOf(options.baseUrl);
    options.headers.host = target.host;
    const request = target.send({
      hostname: target.hostname,
      port: target.port,
      method: options.method,
      path: target.prefix + options.path,
      headers: options.headers,
      servername: target.servername,
      agent: options.fresh ? target.fresh : target.pooled,
    });
    request.setTimeout(options.timeoutMs, () => {
      options.onTimeout();
      request.destroy(new Error("upstream timeout"));
    });
    return request;
  };
}
