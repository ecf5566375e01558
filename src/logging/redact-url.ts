/**
 * A URL with its credentials masked, for messages and the banner:
 * `redis://user:secret@host` -> `redis://user:***@host`, and a lone user name
 * (which some providers use as the token: `rediss://token@host`) masked too.
 * Anything that is not a URL is shown as `(invalid URL)`, never as written.
 */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    else if (parsed.username) parsed.username = "***";
    return parsed.toString();
  } catch {
    return "(invalid URL)";
  }
}
