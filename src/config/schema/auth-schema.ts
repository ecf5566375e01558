import { z } from "zod";
import { fromText, positiveInt, url } from "./field-types.js";

/** A static API key and the group whose models it may use. */
export const apiKeySchema = z
  .object({
    key: z.string({ error: "must be a string" }).min(1, "must not be empty"),
    group: z.string({ error: "must be a group name" }).min(1, "must be a group name"),
    /** A label for logs and metrics-free diagnostics; never the key itself. */
    name: z.string().optional(),
  })
  .strict();

/** Bearer JWTs, verified with jose. Exactly one of `secret` and `jwksUrl`. */
export const jwtSchema = z
  .object({
    /** HS256 shared secret. Empty (an unset `${JWT_SECRET}`): every JWT is refused. */
    secret: z.string({ error: "must be a string" }).optional(),
    /** JWKS endpoint for asymmetric keys (RS256, ES256, ...). */
    jwksUrl: url.optional(),
    /** Required `iss`, when set. */
    issuer: z.string().optional(),
    /** Required `aud`, when set. */
    audience: z.string().optional(),
    /** Claim holding the group name. Default `group`. */
    groupClaim: z.string().min(1).default("group"),
    /** Group for tokens without the claim. Default: such tokens are refused. */
    defaultGroup: z.string().optional(),
    /**
     * Refuse tokens without an `exp` claim, which would otherwise be valid
     * forever. Default true; false accepts them (an issuer that never sets it).
     */
    requireExp: fromText(z.boolean({ error: "must be true or false" })).default(true),
  })
  .strict()
  // Presence, not truthiness: an empty secret is reported by its own field, not twice.
  .refine((jwt) => (jwt.secret !== undefined) !== (jwt.jwksUrl !== undefined), {
    message: "must set exactly one of secret and jwksUrl",
  });

/**
 * Forward mode: in front of a gateway (new-api, one-api) that already has its
 * users' keys and groups. A bearer that is neither a configured key nor a JWT
 * is checked by asking the gateway's `GET /models` with it, and the gateway's
 * answer is what the key may see and use; its calls go to that gateway with
 * the key itself.
 */
export const forwardSchema = z
  .object({
    /** Name of the gateway's channel (type `openai`): keys are checked there and used there. */
    channel: z.string({ error: "must name a channel" }).min(1, "must name a channel"),
    /** Seconds a key the gateway accepted, and its model list, are reused before asking again. Default 60. */
    cacheSec: positiveInt("seconds").default(60),
    /**
     * Seconds a key the gateway refused (401/403) is refused without asking
     * again, so a flood of bad keys is not a flood at the gateway. Default 5.
     */
    refusalCacheSec: positiveInt("seconds").default(5),
    /** Seconds to wait for the gateway's answer to a key check; past it the request gets 502. Default 10. */
    timeoutSec: positiveInt("seconds").default(10),
    /**
     * Keys remembered in each cache (accepted, refused); past it the least
     * recently used is forgotten, so made-up keys cannot grow memory. Default 10000.
     */
    maxCachedKeys: positiveInt("keys").default(10_000),
    /**
     * Gateway checks of keys not seen accepted before, running at once; a new
     * key beyond it gets 503 `upstream_unavailable` with `Retry-After` (keys
     * the gateway accepted in the last day are re-checked outside this
     * bound). Default 16.
     */
    maxChecksInFlight: positiveInt("checks").default(16),
    /**
     * Gateway checks of keys not seen accepted before, started per second on
     * average (a second's worth may start at once); beyond it the same 503.
     * So made-up keys, however many, cost the gateway at most this many
     * calls a second. Default 50.
     */
    maxChecksPerSec: positiveInt("checks").default(50),
    /**
     * Secret (at least 32 characters) from which the key hash (task owner)
     * and the encryption of keys kept for unfinished tasks are derived.
     * Default: a random one generated once and kept in the store. Changing it
     * orphans existing tasks and fails unfinished forward tasks.
     */
    secret: z
      .string({ error: "must be a string" })
      .min(32, "must be at least 32 characters")
      .optional(),
  })
  .strict();

export const authSchema = z
  .object({
    keys: z.array(apiKeySchema).default([]),
    jwt: jwtSchema.optional(),
    /** Forward mode (see {@link forwardSchema}). Default: off. */
    forward: forwardSchema.optional(),
  })
  .strict()
  .prefault({});
