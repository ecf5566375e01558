import { z } from "zod";

const text = (what: string) => z.string({ error: `must be ${what}` });
/**
 * Every string field has a length limit: a task is kept until it expires, so
 * an unbounded field would let one request make the store keep megabytes.
 * OpenAI's own values for these options are a few characters long.
 */
const option = (max = 32) => text("a string").max(max, `must be at most ${max} characters`);

/** The body of `POST /v1/images/tasks`, as the OpenAI image API names its fields. */
export const submitTaskSchema = z
  .object({
    model: text("a string").min(1, "must not be empty").max(100, "must be at most 100 characters"),
    prompt: text("a string")
      .min(1, "must be 1 to 32000 characters")
      .max(32000, "must be 1 to 32000 characters"),
    size: text("'auto' or WIDTHxHEIGHT")
      .regex(/^(auto|[1-9]\d{1,4}x[1-9]\d{1,4})$/, "must be 'auto' or WIDTHxHEIGHT, e.g. 1024x1024")
      .optional(),
    n: z
      .number({ error: "must be an integer from 1 to 10" })
      .int("must be an integer from 1 to 10")
      .min(1, "must be an integer from 1 to 10")
      .max(10, "must be an integer from 1 to 10")
      .default(1),
    response_format: z
      .enum(["url", "b64_json"], { error: "must be 'url' or 'b64_json'" })
      .default("b64_json"),
    quality: option().optional(),
    style: option().optional(),
    user: option(256).optional(),
    background: option().optional(),
    output_format: option().optional(),
    output_compression: z
      .number({ error: "must be an integer from 0 to 100" })
      .int("must be an integer from 0 to 100")
      .min(0, "must be an integer from 0 to 100")
      .max(100, "must be an integer from 0 to 100")
      .optional(),
    moderation: option().optional(),
    /**
     * Partial images to stream while the image is made (0 to 3, default 0):
     * the run asks the channel for a stream, keeps each one and shows it.
     */
    partial_images: z
      .number({ error: "must be an integer from 0 to 3" })
      .int("must be an integer from 0 to 3")
      .min(0, "must be an integer from 0 to 3")
      .max(3, "must be an integer from 0 to 3")
      .optional(),
    /** Checked (and resolved) by `validateWebhookUrl`, which names the problem. */
    webhook_url: z.unknown().optional(),
  })
  .strict();

/** A parsed task submission. */
export type SubmitTaskRequest = z.output<typeof submitTaskSchema>;

/**
 * The fields of `POST /v1/images/edits/tasks` besides its images: those of a
 * task and the edit's own `input_fidelity`.
 */
export const submitEditSchema = submitTaskSchema.extend({
  input_fidelity: option().optional(),
});

/** A parsed edit submission's fields. */
export type SubmitEditRequest = z.output<typeof submitEditSchema>;

/** gpt-image models take these qualities; older names are mapped, anything else dropped. */
const GPT_IMAGE_QUALITY: Record<string, string> = {
  low: "low",
  medium: "medium",
  high: "high",
  auto: "auto",
  standard: "medium",
  hd: "high",
};

/**
 * The body sent to the channel. gpt-image models always answer base64 and
 * refuse `response_format` and `style`, so those stay here (as does
 * `webhook_url`, ours); `quality` is sent only as a value the model takes.
 * `partial_images` is kept in the task (the run adds it, with `stream`).
 * Accepted fields never cause an error.
 */
export function toUpstreamBody(request: SubmitTaskRequest): Record<string, unknown> {
  const {
    response_format: _format,
    style: _style,
    webhook_url: _webhook,
    partial_images: _partials,
    quality,
    ...rest
  } = request;
  // Own keys only: a client's `__proto__` or `constructor` must not reach an inherited value.
  const key = quality?.toLowerCase();
  const mapped =
    key !== undefined && Object.hasOwn(GPT_IMAGE_QUALITY, key) ? GPT_IMAGE_QUALITY[key] : undefined;
  return Object.fromEntries(
    Object.entries({ ...rest, quality: mapped }).filter(([, value]) => value !== undefined),
  );
}
