/** Whether `value` is a JSON object. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A stream event's data as the JSON object it holds; undefined when it is not JSON or no object. */
export function jsonObjectOf(text: string): Record<string, unknown> | undefined {
  try {
    const data = JSON.parse(text) as unknown;
    return isObject(data) ? data : undefined;
  } catch {
    return undefined;
  }
}
