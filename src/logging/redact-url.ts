/**
 * Query parameters that carry a credential: any whose name contains
 * `password`, `secret`, `token` or `key`, in any case (`?password=`,
 * `?access_key=`, `?X-Amz-Security-Token=`, `?apiKey=`).
 */
export const CREDENTIAL_PARAM = /password|secret|token|key/i;

/** What a masked credential shows. */
const MASK = "***";

/**
 * A URL's query (`a=1&password=x`, without the `?`) with the values of its
 * credential parameters masked, the rest as written.
 */
function maskQuery(query: string): string {
  return query
    .split("&")
    .map((pair) => {
      const equals = pair.indexOf("=");
      if (equals < 0) return pair;
      return CREDENTIAL_PARAM.test(decodeName(pair.slice(0, equals)))
        ? `${pair.slice(0, equals)}=${MASK}`
        : pair;
    })
    .join("&");
}

/** A query parameter's name decoded (`access%5Fkey` is `access_key`), as written if it cannot be. */
function decodeName(name: string): string {
  try {
    return decodeURIComponent(name.replaceAll("+", " "));
  } catch {
    return name;
  }
}

/** `rest` (whatever follows a URL's authority) with its query's credentials masked. */
function maskTail(rest: string): string {
  const mark = rest.indexOf("?");
  if (mark < 0) return rest;
  const hash = rest.indexOf("#", mark);
  const query = hash < 0 ? rest.slice(mark + 1) : rest.slice(mark + 1, hash);
  return `${rest.slice(0, mark + 1)}${maskQuery(query)}${hash < 0 ? "" : rest.slice(hash)}`;
}

/**
 * A URL with its credentials masked, for messages, the banner and `/readyz`:
 * `redis://user:secret@host` -> `redis://user:***@host`, a lone user name
 * (which some providers use as the token: `rediss://token@host`) masked too,
 * and the value of every query parameter named like a credential
 * (`redis://host/0?password=***`, `?access_key=***`). The several-host forms
 * (`redis+sentinel://:secret@h1:26379,h2:26379/mymaster`) are masked the same
 * way. Anything else that is not a URL is shown as `(invalid URL)`, never as
 * written.
 */
export function redactUrl(url: string): string {
  const multiHost = /^(rediss?\+(?:sentinel|cluster):\/\/)(?:([^@/]*)@)?([^@]*)$/.exec(url);
  if (multiHost) {
    const [, scheme, auth, rest = ""] = multiHost;
    if (auth === undefined) return `${scheme}${maskTail(rest)}`;
    const colon = auth.indexOf(":");
    return `${scheme}${colon < 0 ? MASK : `${auth.slice(0, colon)}:${MASK}`}@${maskTail(rest)}`;
  }
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = MASK;
    else if (parsed.username) parsed.username = MASK;
    if (parsed.search) parsed.search = maskQuery(parsed.search.slice(1));
    return parsed.toString();
  } catch {
    return "(invalid URL)";
  }
}

/** URLs in running text: a scheme, `://`, then anything up to a space or a quote. */
const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]+/gi;

/**
 * `text` with the credentials of every URL in it masked as {@link redactUrl}
 * does; URLs without credentials are left exactly as written.
 */
export function redactUrlsIn(text: string): string {
  return text.replace(URL_IN_TEXT, (found) => (hasCredentials(found) ? redactUrl(found) : found));
}

/** Whether a URL as written has a user part or a credential in its query. */
function hasCredentials(url: string): boolean {
  const authority = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(url)?.[1] ?? "";
  if (authority.includes("@")) return true;
  const mark = url.indexOf("?");
  if (mark < 0) return false;
  const query = url.slice(mark + 1).split("#")[0] as string;
  return query.split("&").some((pair) => {
    const equals = pair.indexOf("=");
    return equals > 0 && CREDENTIAL_PARAM.test(decodeName(pair.slice(0, equals)));
  });
}
