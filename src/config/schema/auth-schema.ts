import { z } from "zod";
import { fromText, positiveInt, url } from "./field-types.js";

/** A static API key and the group whose models it may use. */
export const apiKeySchema = z
  .object({
    key: z
      .string({ error: "must be a string" })
      .min(1, "must not be empty")
      .meta({
        description:
          "The bearer clients send (`Authorization: Bearer <key>`); kept hashed in memory, " +
          "never logged. Use `${VAR}` to keep it out of the file.",
      }),
    group: z
      .string({ error: "must be a group name" })
      .min(1, "must be a group name")
      .meta({ description: "The group (a key of `groups`) whose models the key may use." }),
    name: z.string().optional().meta({ description: "A label for logs, never the key itself." }),
    webhookUrl: url.optional().meta({
      description:
        "Where the key's background responses (`POST /v1/responses` with `background: true`) " +
        "send their `response.completed`, `response.failed`, `response.cancelled` and " +
        "`response.incomplete` events, as OpenAI's webhooks do; needs `webhooks.secret`. " +
        "Delivered as image tasks' webhooks are (signed, retried, address-checked). Default: none.",
    }),
  })
  .strict();

/** Bearer JWTs, verified with jose. Exactly one of `secret` and `jwksUrl`. */
export const jwtSchema = z
  .object({
    secret: z
      .string({ error: "must be a string" })
      .optional()
      .meta({
        description:
          "HS256 shared secret (exactly one of `secret` and `jwksUrl`). Empty (an unset " +
          "`${JWT_SECRET}`): every JWT is refused.",
      }),
    jwksUrl: url.optional().meta({
      description:
        "JWKS endpoint for public-key algorithms (RS, PS, ES, EdDSA), e.g. " +
        "`https://issuer.example/.well-known/jwks.json` (exactly one of `secret` and `jwksUrl`).",
    }),
    issuer: z.string().optional().meta({ description: "Required `iss` claim, when set." }),
    audience: z.string().optional().meta({ description: "Required `aud` claim, when set." }),
    groupClaim: z
      .string()
      .min(1)
      .default("group")
      .meta({ description: "The claim holding the token's group name." }),
    defaultGroup: z.string().optional().meta({
      description: "Group for tokens without the claim. Default: such tokens are refused.",
    }),
    requireExp: fromText(z.boolean({ error: "must be true or false" }))
      .default(true)
      .meta({
        description:
          "Refuse tokens without an `exp` claim, which would otherwise be valid forever; false " +
          "accepts them (an issuer that never sets it).",
      }),
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
    channel: z
      .string({ error: "must name a channel" })
      .min(1, "must name a channel")
      .meta({
        description:
          "Name of the gateway's channel (type `openai`): unknown bearer keys are checked there " +
          "and their requests sent there.",
      }),
    cacheSec: positiveInt("seconds")
      .default(60)
      .meta({
        description:
          "Seconds a key the gateway accepted, and its model list, are reused before asking " +
          "again (so a revoked key keeps working here for at most this long).",
      }),
    refusalCacheSec: positiveInt("seconds")
      .default(5)
      .meta({
        description:
          "Seconds a key the gateway refused (401/403) is refused without asking again, so a " +
          "flood of bad keys is not a flood at the gateway.",
      }),
    timeoutSec: positiveInt("seconds")
      .default(10)
      .meta({
        description:
          "Seconds to wait for the gateway's answer to a key check; past it the request gets " +
          "502 `upstream_unavailable`.",
      }),
    maxCachedKeys: positiveInt("keys")
      .default(10_000)
      .meta({
        description:
          "Keys remembered in each cache (accepted, refused); past it the least recently used " +
          "is forgotten, so made-up keys cannot grow memory.",
      }),
    maxChecksInFlight: positiveInt("checks")
      .default(16)
      .meta({
        description:
          "Gateway checks of keys not seen accepted before, running at once; a new key beyond " +
          "it gets 503 `upstream_unavailable` with `Retry-After` (keys the gateway accepted in " +
          "the last day are checked again outside this bound).",
      }),
    maxChecksPerSec: positiveInt("checks")
      .default(50)
      .meta({
        description:
          "Gateway checks of keys not seen accepted before, started per second on average (a " +
          "second's worth may start at once); beyond it the same 503. So made-up keys, however " +
          "many, cost the gateway at most this many calls a second.",
      }),
    maxChecksPerClientPerSec: positiveInt("checks")
      .default(5)
      .meta({
        description:
          "Gateway checks of new keys one client address may start per second (a second's " +
          "worth at once), within `maxChecksPerSec`; beyond it that address gets 429 " +
          "`rate_limited` with `Retry-After`. So one address sending made-up keys cannot use up " +
          "the checks new users need. The address is the one `server.trustProxy` resolves.",
      }),
    maxChecksInFlightPerClient: positiveInt("checks")
      .default(4)
      .meta({
        description:
          "Gateway checks of new keys from one client address running at once, within " +
          "`maxChecksInFlight`; beyond it that address gets 429 `rate_limited` with `Retry-After`.",
      }),
    secret: z
      .string({ error: "must be a string" })
      .min(32, "must be at least 32 characters")
      .optional()
      .meta({
        description:
          "Secret (at least 32 characters, e.g. `openssl rand -base64 48`) from which the key " +
          "hash (task owner) and the encryption of keys kept for unfinished tasks are derived. " +
          "Required with a `redis://` store. Default: on SQLite, one generated on first start " +
          "into a file of its own beside the database (`<database>.forward-secret`, mode 0600); " +
          "on `memory://`, a random one in memory. Changing it orphans existing tasks and fails " +
          "unfinished forward tasks with `credential_unavailable`.",
      }),
  })
  .strict();

/** Who may call the service: static keys, JWTs, and forward mode's gateway keys. */
export const authSchema = z
  .object({
    keys: z.array(apiKeySchema).default([]).meta({
      description: "Static API keys, each in a group.",
    }),
    jwt: jwtSchema.optional().meta({
      description: "Bearer JWTs, verified with jose. Default: off.",
    }),
    forward: forwardSchema.optional().meta({
      description:
        "Forward mode: bearer keys that are neither configured keys nor JWTs are taken as keys " +
        "of a gateway (new-api, one-api), which decides what they may use. Default: off.",
    }),
  })
  .strict()
  .prefault({})
  .meta({ description: "Who may call the service: static keys, JWTs, forward mode." });
