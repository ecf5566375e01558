import type { IncomingHttpHeaders } from "node:http";

/**
 * Client request headers a channel may see: the ones OpenAI-compatible APIs
 * read. Everything else stays here, by construction: credentials
 * (`Authorization`, `api-key`, `x-api-key`, `x-goog-api-key`, cookies), who
 * is billed (`OpenAI-Organization`, `OpenAI-Project`: a multi-org channel key
 * would let the client pick), `X-Forwarded-*`, hop-by-hop headers
 * (`Connection`, `Keep-Alive`, `TE`, `Trailer`, `Transfer-Encoding`,
 * `Upgrade`, `Proxy-*`) and the ones that framed the client's body
 * (`Expect`, `Content-Encoding`, `Content-Length`).
 */
export const FORWARDED_REQUEST_HEADERS: readonly string[] = [
  "accept",
  "user-agent",
  "openai-beta",
  "idempotency-key",
  "x-client-request-id",
];

/**
 * Channel response headers a client may see: the body's type, request ids,
 * rate-limit state and the retry hints the SDKs act on. The channel's
 * `x-request-id` reaches the client as `x-upstream-request-id`: `X-Request-Id`
 * is the service's own, on every answer. Not the channel's
 * account (`openai-organization`, `openai-project`), cookies, CORS, caching,
 * server banners or hop-by-hop headers. `x-ratelimit-*` passes by prefix.
 */
export const FORWARDED_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  "content-type",
  "content-disposition",
  "x-request-id",
  "openai-processing-ms",
  "openai-version",
  "retry-after",
  "retry-after-ms",
  "x-should-retry",
]);
const RATE_LIMIT_PREFIX = "x-ratelimit-";

/**
 * Tokens of a `Connection` header: the headers the sender declared
 * hop-by-hop (RFC 9110 section 7.6.1), never forwarded even if allowed.
 */
function connectionTokens(value: string | string[] | undefined): Set<string> | undefined {
  if (!value) return undefined;
  // Nearly every message says only this much: nothing to exclude.
  if (typeof value === "string" && value.length <= 10) {
    const lower = value.toLowerCase();
    if (lower === "keep-alive" || lower === "close") return undefined;
  }
  const tokens = new Set<string>();
  for (const token of String(value).split(",")) tokens.add(token.trim().toLowerCase());
  tokens.delete("close");
  tokens.delete("keep-alive");
  return tokens.size > 0 ? tokens : undefined;
}

/**
 * The client headers to send a channel: the allow-list minus what
 * `Connection` names. The channel client adds the credential, the body's
 * framing and `accept-encoding: identity` (the answer is scrubbed, so it must
 * arrive readable).
 */
export function forwardedRequestHeaders(
  headers: IncomingHttpHeaders,
): Record<string, string | string[] | undefined> {
  const hopByHop = connectionTokens(headers.connection);
  const out: Record<string, string | string[] | undefined> = {};
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = headers[name];
    if (value !== undefined && !hopByHop?.has(name)) out[name] = value;
  }
  return out;
}

/** Whether a channel response header may reach the client. */
export function isForwardedResponseHeader(name: string): boolean {
  return FORWARDED_RESPONSE_HEADERS.has(name) || name.startsWith(RATE_LIMIT_PREFIX);
}

/** Headers passed on under a name of their own. */
const RENAMED: Readonly<Record<string, string>> = { "x-request-id": "x-upstream-request-id" };

/**
 * Copies the allowed headers of a channel's answer, each value passed
 * through `scrub` (a channel may echo its key in any header), minus what the
 * channel's `Connection` names.
 */
export function copyResponseHeaders(
  from: IncomingHttpHeaders,
  setHeader: (name: string, value: string | string[]) => void,
  scrub: (value: string) => string,
): void {
  const hopByHop = connectionTokens(from.connection);
  for (const name in from) {
    if (!isForwardedResponseHeader(name) || hopByHop?.has(name)) continue;
    const value = from[name];
    if (value === undefined) continue;
    setHeader(RENAMED[name] ?? name, Array.isArray(value) ? value.map(scrub) : scrub(value));
  }
}
