/**
 * Whether a `Content-Type` names JSON: `application/json` or a `+json`
 * type (`application/problem+json`), any case, with or without parameters.
 */
export function isJsonMediaType(contentType: string): boolean {
  // Nearly every answer says exactly this: no lower-casing needed to tell.
  if (contentType.startsWith("application/json")) return true;
  const type = contentType.toLowerCase();
  return type.startsWith("application/json") || /^application\/[\w.-]+\+json\b/.test(type);
}
