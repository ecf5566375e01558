import { z } from "zod";
import { webhookSecretProblem } from "../../webhooks/webhook-secret.js";
import { fromText, positiveInt } from "./field-types.js";

/** Signed webhook deliveries when a task finishes (`webhook_url` on a submission). */
export const webhooksSchema = z
  .object({
    /**
     * Signing secret: `whsec_` and the base64 of 24 to 64 random bytes
     * (Standard Webhooks). The HMAC key is the decoded bytes. Default: unset,
     * and a submission with `webhook_url` is refused with 400 `invalid_value`;
     * set but empty (an unset `${VAR}`) is the same as unset.
     */
    secret: z
      .string({ error: "must be a string" })
      .refine((secret) => secret === "" || webhookSecretProblem(secret) === undefined, {
        error: (issue) => webhookSecretProblem(String(issue.input)) ?? "is not a valid secret",
      })
      .transform((secret) => secret || undefined)
      .optional(),
    /**
     * Attempts per event in all, the first included. Default 8. Attempts stop
     * at the first 2xx answer.
     */
    maxAttempts: fromText(
      z
        .number({ error: "must be a number (attempts)" })
        .int("must be an integer")
        .min(1, "must be between 1 and 100")
        .max(100, "must be between 1 and 100"),
    ).default(8),
    /**
     * Seconds to wait before each retry: the n-th entry is the wait after the
     * n-th failed attempt. `maxAttempts - 1` waits are needed; a shorter list
     * repeats its last entry, entries past `maxAttempts - 1` are unused.
     * Default `[5, 300, 1800, 7200, 18000, 36000, 36000]` (5 s, 5 min, 30 min,
     * 2 h, 5 h, 10 h, 10 h: about 27.6 hours in all, as Svix does).
     */
    retryScheduleSec: z
      .array(
        fromText(
          z.number({ error: "must be a number" }).int("must be an integer").min(0, "must be >= 0"),
        ),
        { error: "must be a list of seconds" },
      )
      .min(1, "must list at least one wait")
      .default([5, 300, 1800, 7200, 18000, 36000, 36000]),
    /**
     * Deliver to loopback, private (RFC 1918, CGNAT, IPv6 unique local),
     * link-local and reserved addresses too (receivers on the service's own
     * network). Cloud metadata endpoints and multicast stay refused either
     * way. Default false.
     */
    allowPrivateNetworks: fromText(z.boolean({ error: "must be true or false" })).default(false),
    /**
     * Seconds one attempt may take, from connecting to the receiver's status
     * line; past it the attempt counts as failed (timeout) and is retried.
     * Default 15 (as Svix).
     */
    timeoutSec: positiveInt("seconds").default(15),
    /**
     * Attempts in flight at once in one process; more wait their turn. Each
     * ends within `timeoutSec`, so a slow receiver holds a slot at most that
     * long and never a task slot. Default 32.
     */
    maxConcurrent: positiveInt("attempts").default(32),
  })
  .strict()
  .prefault({});
