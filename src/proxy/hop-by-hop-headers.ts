/** Headers that belong to one connection and must not be copied from the channel's response. */
export const HOP_BY_HOP_HEADERS = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/**
 * Client request headers never sent to a channel: its credentials, and what
 * described the body as the client sent it (the body goes on decoded, with a
 * fresh Content-Length). `expect` also stops http-proxy from emitting the
 * `proxyReq` event that swaps the key and writes the body.
 */
export const REQUEST_HEADERS_NOT_FORWARDED = [
  "authorization",
  "api-key",
  "x-api-key",
  "cookie",
  "proxy-authorization",
  "expect",
  "transfer-encoding",
  "content-encoding",
  "content-length",
  "te",
  "trailer",
  "upgrade",
  "keep-alive",
];
