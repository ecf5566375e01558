/**
 * A URL with its credentials masked, for messages and the banner:
 * `redis://user:secret@host` -> `redis://user:***@host`, and a lone user name
 * (which some providers use as the token: `rediss://token@host`) masked too.
 * The several-host forms (`redis+sentinel://:secret@h1:26379,h2:26379/mymaster`)
 * are masked the same way. Anything else that is not a URL is shown as
 * `(invalid URL)`, never as written.
 */
export function redactUrl(url: string): string {
  const multiHost = /^(rediss?\+(?:sentinel|cluster):\/\/)(?:([^@/]*)@)?([^@]*)$/.exec(url);
  if (multiHost) {
    const [, scheme, auth, rest] = multiHost;
    if (auth === undefined) return url;
    const colon = auth.indexOf(":");
    return `${scheme}${colon < 0 ? "***" : `${auth.slice(0, colon)}:***`}@${rest}`;
  }
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    else if (parsed.username) parsed.username = "***";
    return parsed.toString();
  } catch {
    return "(invalid URL)";
  }
}
