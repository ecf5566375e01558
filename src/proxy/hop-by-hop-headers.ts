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

/** Client headers that may carry the client's own credentials; never sent to a channel. */
export const CLIENT_CREDENTIAL_HEADERS = ["authorization", "api-key", "x-api-key", "cookie"];
