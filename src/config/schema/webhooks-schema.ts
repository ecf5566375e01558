import { z } from "zod";
import { webhookSecretProblem } from "./webhook-secret.js";
import { fromText, positiveInt } from "./field-types.js";

/** Signed webhook deliveries when a task finishes (`webhook_url` on a submission). */
export const webhooksSchema = z
  .object({
    secret: z
      .string({ error: "must be a string" })
      .refine((secret) => secret === "" || webhookSecretProblem(secret) === undefined, {
        error: (issue) => webhookSecretProblem(String(issue.input)) ?? "is not a valid secret",
      })
      .transform((secret) => secret || undefined)
      .optional()
      .meta({
        description:
          "Signing secret: `whsec_` and the standard (padded) base64 of 24 to 64 random bytes " +
          "(Standard Webhooks); the HMAC key is the decoded bytes. Default: unset, and a " +
          "submission with `webhook_url` is refused with 400 `invalid_value`; set but empty " +
          "(an unset `${VAR}`) is the same as unset. `WEBHOOKS_SECRET` overrides it.",
      }),
    maxAttempts: fromText(
      z
        .number({ error: "must be a number (attempts)" })
        .int("must be an integer")
        .min(1, "must be between 1 and 100")
        .max(100, "must be between 1 and 100"),
    )
      .default(8)
      .meta({
        description:
          "Delivery attempts per event in all, the first included. Attempts stop at the first " +
          "2xx answer.",
      }),
    retryScheduleSec: z
      .array(
        fromText(
          z.number({ error: "must be a number" }).int("must be an integer").min(0, "must be >= 0"),
        ),
        { error: "must be a list of seconds" },
      )
      .min(1, "must list at least one wait")
      .default([5, 300, 1800, 7200, 18000, 36000, 36000])
      .meta({
        description:
          "Seconds to wait before each retry: the n-th entry is the wait after the n-th failed " +
          "attempt. A shorter list than `maxAttempts - 1` repeats its last entry; entries past " +
          "it are unused. The default (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h) spans about " +
          "27.6 hours, as Svix does.",
      }),
    allowPrivateNetworks: fromText(z.boolean({ error: "must be true or false" }))
      .default(false)
      .meta({
        description:
          "Deliver to loopback, private (RFC 1918, CGNAT, IPv6 unique local), link-local and " +
          "reserved addresses too (receivers on the service's own network). Cloud metadata " +
          "endpoints and multicast stay refused either way. `WEBHOOKS_ALLOW_PRIVATE_NETWORKS` " +
          "overrides it.",
      }),
    timeoutSec: positiveInt("seconds")
      .default(15)
      .meta({
        description:
          "Seconds one attempt may take, from connecting to the receiver's status line; past " +
          "it the attempt counts as failed (`timeout`) and is retried.",
      }),
    maxConcurrent: positiveInt("attempts")
      .default(32)
      .meta({
        description:
          "Attempts in flight at once in one process; more wait their turn. Each ends within " +
          "`timeoutSec`, so a slow receiver holds a slot at most that long and never a task " +
          "slot.",
      }),
  })
  .strict()
  .prefault({})
  .meta({
    description: "Signed webhook deliveries when a task finishes (`webhook_url` on a submission).",
  });
