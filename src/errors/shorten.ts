/** Longest echoed value in an error message. */
export const MAX_ECHOED_CHARS = 100;

/**
 * Shortens a value a client sent (a model id, task id, path, field name)
 * before an error message echoes it, so a 1 MB model id never comes back as
 * a 1 MB error. At most {@link MAX_ECHOED_CHARS} characters, an ellipsis
 * marking the cut.
 */
export function shorten(value: string, max = MAX_ECHOED_CHARS): string {
  if (value.length <= max) return value;
  // Cut on a code point, never between the halves of a surrogate pair.
  let end = max - 1;
  const code = value.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return `${value.slice(0, end)}…`;
}
