import type { z } from "zod";
import { AppError } from "./app-error.js";

/**
 * Parses a request body with a zod schema. The first problem becomes the
 * error, with `param` naming the field as OpenAI does: a missing field is
 * `missing_required_parameter`, anything else `invalid_value`.
 */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    throw new AppError("invalid_value", "The request body must be a JSON object.");
  }
  const result = schema.safeParse(body, { reportInput: true });
  if (result.success) return result.data;
  const issue = result.error.issues[0] as z.core.$ZodIssue;
  if (issue.code === "unrecognized_keys") {
    const key = issue.keys[0] ?? "";
    throw new AppError("invalid_value", `Unrecognized request argument supplied: ${key}`, {
      param: key,
    });
  }
  const param = issue.path.map(String).join(".") || null;
  if (issue.code === "invalid_type" && issue.input === undefined) {
    throw new AppError("missing_required_parameter", `Missing required parameter: '${param}'.`, {
      param,
    });
  }
  throw new AppError("invalid_value", `Invalid '${param}': ${issue.message}`, { param });
}
