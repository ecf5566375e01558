import type { z } from "zod";
import { ServiceError } from "./service-error.js";
import { shorten } from "./shorten.js";

/**
 * Parses a request body with a zod schema. The first problem becomes the
 * error, with `param` naming the field as OpenAI does: a missing field is
 * `missing_required_parameter`, anything else `invalid_value`.
 */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  // OpenAI's optional fields are nullable: `"quality": null` means "not given".
  const given = Object.fromEntries(
    Object.entries(requireJsonObject(body)).filter(([, value]) => value !== null),
  );
  const result = schema.safeParse(given, { reportInput: true });
  if (result.success) return result.data;
  const issue = result.error.issues[0] as z.core.$ZodIssue;
  if (issue.code === "unrecognized_keys") {
    const key = shorten(issue.keys[0] ?? "");
    throw new ServiceError("invalid_value", `Unrecognized request argument supplied: ${key}`, {
      param: key,
    });
  }
  const joined = issue.path.map(String).join(".");
  const param = joined ? shorten(joined) : null;
  if (issue.code === "invalid_type" && issue.input === undefined) {
    throw new ServiceError(
      "missing_required_parameter",
      `Missing required parameter: '${param}'.`,
      {
        param,
      },
    );
  }
  throw new ServiceError("invalid_value", `Invalid '${param}': ${issue.message}`, { param });
}

/**
 * The parsed body as an object: no body at all is `invalid_json` (there is
 * nothing to parse), valid JSON that is not an object is `invalid_value`.
 */
export function requireJsonObject(body: unknown): Record<string, unknown> {
  if (body === undefined) {
    throw new ServiceError("invalid_json", "The request body is empty; send a JSON object.");
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    throw new ServiceError("invalid_value", "The request body must be a JSON object.");
  }
  return body as Record<string, unknown>;
}
