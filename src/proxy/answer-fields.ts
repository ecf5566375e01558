import { scanJson, valueAt } from "../http/scan-json.js";

/** What {@link answerFields} returns for bytes that are not JSON. */
export const BROKEN: unique symbol = Symbol("broken answer");

/** The top-level members of a JSON answer the passthrough reads (usage, a response's id). */
const ANSWER_MEMBERS = ["id", "model", "usage", "response"];
const USAGE = ANSWER_MEMBERS.indexOf("usage");
/** The members of `usage` that count tokens (see `usageOf`). */
const USAGE_MEMBERS = ["prompt_tokens", "completion_tokens", "input_tokens", "output_tokens"];
/**
 * Deeper answers are left to JSON.parse, which has no depth limit: the scan
 * recurses, and an answer a channel made is not refused for its depth.
 */
const MAX_SCANNED_DEPTH = 64;

/**
 * A JSON answer as the passthrough reads it: checked as JSON exactly as
 * JSON.parse would, and only the members it reads made into values (`id`,
 * `model`, `response`, and of `usage` the token counts), instead of the
 * whole answer parsed into objects. {@link BROKEN} when it is not JSON.
 */
export function answerFields(body: Buffer): unknown {
  const scanned = scanJson(body, ANSWER_MEMBERS, MAX_SCANNED_DEPTH);
  if (!scanned?.isObject) return parsed(body);
  const fields: Record<string, unknown> = {};
  const { starts, ends } = scanned;
  for (let i = 0; i < ANSWER_MEMBERS.length; i += 1) {
    const start = starts[i] as number;
    if (start === -1) continue;
    const end = ends[i] as number;
    fields[ANSWER_MEMBERS[i] as string] =
      i === USAGE && body[start] === 0x7b
        ? usageAt(body.subarray(start, end))
        : valueAt(body, start, end);
  }
  return fields;
}

/** The token counts of a `usage` object (its other members are not made into values). */
function usageAt(bytes: Buffer): Record<string, unknown> {
  const scanned = scanJson(bytes, USAGE_MEMBERS, MAX_SCANNED_DEPTH);
  if (!scanned) return parsed(bytes) as Record<string, unknown>;
  const usage: Record<string, unknown> = {};
  const { starts, ends } = scanned;
  for (let i = 0; i < USAGE_MEMBERS.length; i += 1) {
    const start = starts[i] as number;
    if (start !== -1) usage[USAGE_MEMBERS[i] as string] = valueAt(bytes, start, ends[i] as number);
  }
  return usage;
}

/** The answer parsed whole: one the scan does not decide (not an object, or deep). */
function parsed(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return BROKEN;
  }
}
