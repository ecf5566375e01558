/**
 * Query parameters never passed on: credentials (the channel's key is the
 * only one a channel gets; `key` is how Google's APIs take one) and `model`
 * (the body names the model, and only that one is checked against the key's
 * group and routed).
 */
const DROPPED_PARAMETERS: ReadonlySet<string> = new Set([
  "model",
  "key",
  "api-key",
  "api_key",
  "apikey",
  "access_token",
  "access-token",
  "token",
  "auth",
  "authorization",
  "password",
  "secret",
]);

/**
 * The query string a channel gets: the client's (`?api-version=...` of
 * Azure-style channels), byte for byte, minus the parameters it must not see.
 * `search` is what follows the path, `?` included, or empty.
 */
export function forwardedQuery(search: string): string {
  if (search.length <= 1) return "";
  const kept: string[] = [];
  for (const pair of search.slice(1).split("&")) {
    if (pair === "") continue;
    const equals = pair.indexOf("=");
    const name = nameOf(equals === -1 ? pair : pair.slice(0, equals));
    if (name !== undefined && !DROPPED_PARAMETERS.has(name)) kept.push(pair);
  }
  return kept.length === 0 ? "" : `?${kept.join("&")}`;
}

/** A parameter's name as a server reads it, lower-cased; `undefined` if it cannot be decoded. */
function nameOf(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw.replaceAll("+", " ")).trim().toLowerCase();
  } catch {
    return undefined;
  }
}
