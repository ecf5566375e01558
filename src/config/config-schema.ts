import { z } from "zod";
import { webhookSecretProblem } from "../webhooks/webhook-secret.js";

/**
 * `${VAR}` is substituted into the parsed YAML as text, so `port: ${PORT}`
 * arrives as "8080": numbers and booleans are also read from such text.
 */
const fromText = <T extends z.ZodType>(schema: T) =>
  z.preprocess((value) => {
    if (typeof value !== "string") return value;
    const text = value.trim();
    if (/^-?\d+(\.\d+)?$/.test(text)) return Number(text);
    if (text === "true" || text === "false") return text === "true";
    return value;
  }, schema);

const positiveInt = (field: string) =>
  fromText(
    z
      .number({ error: `must be a number (${field})` })
      .int("must be an integer")
      .positive("must be > 0"),
  );

/** A TCP port to listen on; 0 picks a free one. */
const portNumber = fromText(
  z
    .number({ error: "must be a number" })
    .int("must be an integer")
    .min(0, "must be between 0 and 65535")
    .max(65535, "must be between 0 and 65535"),
);

const modelPatterns = z
  .array(z.string().min(1, "must not be empty"), { error: "must be a list of model ids or globs" })
  .min(1, "must list at least one model id or glob");

const url = z.string({ error: "must be a URL" }).refine((value) => {
  try {
    const parsed = new URL(value);
    return parsed.protocol === "http:" || parsed.protocol === "https:";
  } catch {
    return false;
  }
}, "must be a URL");

/** An http(s) origin (scheme, host, port; no path), kept in its normalised form. */
const origin = z
  .string({ error: "must be an http(s) origin" })
  .refine((value) => {
    try {
      const parsed = new URL(value);
      return (
        (parsed.protocol === "http:" || parsed.protocol === "https:") &&
        parsed.pathname === "/" &&
        !parsed.search &&
        !parsed.hash &&
        !parsed.username &&
        !parsed.password
      );
    } catch {
      return false;
    }
  }, "must be an http(s) origin such as https://cdn.example.com (no path)")
  .transform((value) => new URL(value).origin);

/** The HTTP listener. */
export const serverSchema = z
  .object({
    /** Port to listen on. Default 8080; `PORT` overrides it; 0 picks a free port. */
    port: portNumber.default(8080),
    /**
     * Interface to bind. Default `0.0.0.0` (all), as a container or ingress
     * backend needs; the embedded demo configuration binds `127.0.0.1`
     * (`HOST` there), since its demo key reaches every model.
     */
    host: z.string().min(1).default("0.0.0.0"),
    /**
     * Base of the URLs the service hands out (task `Location`, signed image
     * URLs). Default: derived from each request's Host (and, with
     * `trustProxy`, `X-Forwarded-Proto`/`-Host`).
     */
    publicBaseUrl: url.optional(),
    /** Trust `X-Forwarded-*` headers from an ingress or CDN. Default false. */
    trustProxy: fromText(z.boolean({ error: "must be true or false" })).default(false),
    /**
     * Largest JSON request body, in bytes, on routes whose bodies can be big
     * (chat with images, responses, embeddings). Routes that take a prompt
     * and a few fields (image tasks, image generations, speech) accept
     * 1 MiB, or this if lower. Default 20 MiB (OpenAI's own cap for chat).
     */
    maxBodyBytes: positiveInt("bytes").default(20 * 1024 * 1024),
    /**
     * Largest upload, in bytes: a `multipart/form-data` body (image edits and
     * variations, audio; edit tasks), or an edit task's JSON with `data:` URLs.
     * Default 64 MiB.
     */
    maxUploadBytes: positiveInt("bytes").default(64 * 1024 * 1024),
    /**
     * Seconds an authenticated request's body may take to arrive, apart from
     * the time its answer takes (the server itself has no request timeout,
     * for the long synchronous image route). Default 300, Node's own default.
     */
    bodyTimeoutSec: positiveInt("seconds").default(300),
    /**
     * Largest non-streamed JSON answer read from a channel, in bytes (it is
     * read whole, to pass on only complete JSON). Default 128 MiB.
     */
    maxResponseBytes: positiveInt("bytes").default(128 * 1024 * 1024),
    /**
     * Secret that signs image URLs. Default: a random one kept in the store,
     * so URLs survive restarts and are valid on every replica.
     */
    urlSigningSecret: z.string().min(16, "must be at least 16 characters").optional(),
    /** Seconds SIGTERM waits for in-flight requests before exiting. Default 25. */
    shutdownGraceSec: positiveInt("seconds").default(25),
  })
  .strict()
  .prefault({});

/** Where tasks and image bytes live. */
export const storeSchema = z
  .object({
    /**
     * `memory://` (one process, lost on restart), `sqlite://./path.db` (one
     * process, survives restarts; the default in the embedded config) or
     * `redis://host:6379/0` (`rediss://` for TLS): any number of replicas.
     * `STORE_URL` overrides it.
     */
    url: z
      .string({ error: "must be a store URL" })
      .regex(
        /^(memory|sqlite|redis|rediss):\/\//,
        "must start with memory://, sqlite://, redis:// or rediss://",
      )
      .default("memory://"),
    /**
     * Redis only: the start of every key the service writes (task records,
     * images, queue, events). Replicas of one deployment share it; two
     * deployments on one Redis need two prefixes. Default `image-task-sidecar`.
     */
    prefix: z
      .string({ error: "must be a string" })
      .regex(/^[A-Za-z0-9_.:{}-]{1,64}$/, "must be 1-64 letters, digits or _ . : - { }")
      .default("image-task-sidecar"),
  })
  .strict()
  .prefault({});

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

/** Per-key shares of the task queue and store; each field falls back to `imageTasks`. */
export const groupImageTasksSchema = z
  .object({
    /** Tasks one key of the group may have waiting at once. Default `imageTasks.maxQueuedPerKey`. */
    maxQueuedPerKey: positiveInt("tasks").optional(),
    /**
     * Tasks one key of the group may hold at once, finished ones included until
     * they expire. Default `imageTasks.maxRetainedPerKey`.
     */
    maxRetainedPerKey: positiveInt("tasks").optional(),
  })
  .strict();

export const groupSchema = z
  .object({
    /** Model ids and `*` globs the group may see and use. */
    models: modelPatterns,
    /** This group's per-key task limits; unset fields take the `imageTasks` defaults. */
    imageTasks: groupImageTasksSchema.optional(),
  })
  .strict();

/** An upstream OpenAI-compatible gateway or provider. */
export const channelSchema = z
  .object({
    /** Unique name, used in logs and metric labels. */
    name: z
      .string({ error: "must be a name" })
      .regex(/^[A-Za-z0-9_.-]{1,64}$/, "must be 1-64 letters, digits, '_', '.' or '-'"),
    /**
     * `openai` (default): any OpenAI-compatible HTTP API at `baseUrl`.
     * `demo`: the built-in demo channel, started in-process; needs no `baseUrl`.
     */
    type: z.enum(["openai", "demo"], { error: "must be openai or demo" }).default("openai"),
    /** The channel's `/v1` base URL, e.g. `http://127.0.0.1:3000/v1`. */
    baseUrl: url.optional(),
    /** Sent upstream as `Authorization: Bearer <apiKey>`; never logged or returned. */
    apiKey: z.string().optional(),
    /** Model ids and `*` globs; a glob is resolved from the channel's own `/v1/models`. */
    models: modelPatterns,
    /** Lower is tried first. Default 0. */
    priority: fromText(z.number({ error: "must be a number" }).int("must be an integer")).default(
      0,
    ),
    /** Share of traffic among channels of one priority. Default 1. */
    weight: fromText(z.number({ error: "must be a number" }).positive("must be > 0")).default(1),
    /** Seconds to wait for a chat answer to start or to continue streaming. Default 120. */
    timeoutSec: positiveInt("seconds").default(120),
    /** Seconds to wait for a synchronous image generation. Default 600. */
    imageTimeoutSec: positiveInt("seconds").default(600),
    /** Seconds a fetched `/v1/models` list is reused. Default 60. */
    modelsCacheSec: positiveInt("seconds").default(60),
    /**
     * Origins besides the channel's own that image URLs in its answers are
     * downloaded from (e.g. its CDN, `https://cdn.example.com`). Default none:
     * only the channel's own origin. Downloads from these never reach
     * loopback, private, link-local or metadata addresses (checked on the URL
     * and again on the address connected to); redirects are never followed.
     */
    imageUrlOrigins: z.array(origin, { error: "must be a list of origins" }).default([]),
    /**
     * Largest image accepted from the channel, decoded from `b64_json` or
     * downloaded from a `url`, in bytes; its whole answer may hold `n` such
     * images. Default 32 MiB.
     */
    maxImageBytes: positiveInt("bytes").default(32 * 1024 * 1024),
    /** Demo channel only: how long drawing an image takes, in ms. Default 3000. */
    imageDelayMs: fromText(z.number().int().min(0, "must be >= 0")).default(3000),
  })
  .strict()
  .superRefine((channel, ctx) => {
    if (channel.type === "openai" && !channel.baseUrl) {
      ctx.addIssue({ code: "custom", path: ["baseUrl"], message: "must be a URL" });
    }
  });

/** Limits of the asynchronous image-task API. */
export const imageTasksSchema = z
  .object({
    /** Seconds one generation may run, from `started_at`. Default 600; `IMAGE_ASYNC_TIMEOUT_SEC`. */
    timeoutSec: positiveInt("seconds").default(600),
    /** Tasks in progress at once. Default 2; `IMAGE_ASYNC_MAX_CONCURRENT`. */
    maxConcurrent: positiveInt("tasks").default(2),
    /** Queued tasks beyond which submissions get 429 `queue_full`. Default 1000. */
    maxQueued: positiveInt("tasks").default(1000),
    /** Seconds a finished task and its images are kept. Default 86400. */
    retentionSec: positiveInt("seconds").default(86400),
    /** `Retry-After` sent while a task is unfinished, in seconds. Default 2. */
    pollIntervalSec: positiveInt("seconds").default(2),
    /**
     * Runs a task may start. A task still in progress when its process died is
     * run again until it has started this many times, then fails `interrupted`.
     * Default 2.
     */
    maxAttempts: positiveInt("attempts").default(2),
    /**
     * Tasks one key may have waiting at once, so that one key cannot fill the
     * queue for everyone (429 `queue_full` beyond it). Default 100; a group may
     * set its own (`groups.<name>.imageTasks`).
     */
    maxQueuedPerKey: positiveInt("tasks").default(100),
    /**
     * Tasks one key may hold in the store at once: unfinished ones and finished
     * ones until they expire (`retentionSec`). Bounds what one key can make the
     * store keep, submitting and cancelling included (429 `too_many_tasks`
     * beyond it). Default 1000; a group may set its own.
     */
    maxRetainedPerKey: positiveInt("tasks").default(1000),
    /**
     * Redis only: seconds a replica holds a running task's lease without
     * renewing it (renewed every half of it). A replica that dies has its
     * tasks picked up by the others within about three times this. Default 30.
     */
    leaseSec: positiveInt("seconds").default(30),
  })
  .strict()
  .prefault({});

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

/** Who may read `GET /metrics`, and where. */
export const metricsSchema = z
  .object({
    /**
     * Serve `/metrics` on a listener of its own at this port, and then not on
     * the main port (so the API port can be public and the metrics port not).
     * Default: unset, `/metrics` is served on the main port. 0 picks a free port.
     */
    port: portNumber.optional(),
    /** Interface of that listener, e.g. `127.0.0.1`. Default: `server.host`. */
    host: z.string().min(1).optional(),
    /**
     * When set, `/metrics` (wherever it is served) answers only requests with
     * `Authorization: Bearer <bearerToken>` (Prometheus: `authorization:
     * {credentials: ...}`). Set but empty (an unset `${VAR}`): every scrape is
     * refused. Default: unset, no auth.
     */
    bearerToken: z.string({ error: "must be a string" }).optional(),
  })
  .strict()
  .prefault({});

export const loggingSchema = z
  .object({
    /** pino level. Default `info`; `LOG_LEVEL` overrides it. */
    level: z
      .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
        error: "must be one of fatal, error, warn, info, debug, trace, silent",
      })
      .default("info"),
  })
  .strict()
  .prefault({});

/** The whole configuration file. */
export const configSchema = z
  .object({
    server: serverSchema,
    store: storeSchema,
    auth: authSchema,
    groups: z.record(z.string(), groupSchema, { error: "must map group names to {models}" }),
    channels: z
      .array(channelSchema, { error: "must list at least one channel" })
      .min(1, "must list at least one channel"),
    imageTasks: imageTasksSchema,
    webhooks: webhooksSchema,
    metrics: metricsSchema,
    logging: loggingSchema,
  })
  .strict()
  .superRefine((config, ctx) => {
    config.auth.keys.forEach((key, index) => {
      if (!Object.hasOwn(config.groups, key.group)) {
        ctx.addIssue({
          code: "custom",
          path: ["auth", "keys", index, "group"],
          message: `unknown group "${key.group}"`,
        });
      }
    });
    const defaultGroup = config.auth.jwt?.defaultGroup;
    if (defaultGroup && !Object.hasOwn(config.groups, defaultGroup)) {
      ctx.addIssue({
        code: "custom",
        path: ["auth", "jwt", "defaultGroup"],
        message: `unknown group "${defaultGroup}"`,
      });
    }
    const forward = config.auth.forward;
    if (forward) {
      const channel = config.channels.find((candidate) => candidate.name === forward.channel);
      if (!channel || channel.type !== "openai") {
        ctx.addIssue({
          code: "custom",
          path: ["auth", "forward", "channel"],
          message: channel
            ? `channel "${forward.channel}" is of type ${channel.type}; forward mode needs an openai channel`
            : `unknown channel "${forward.channel}"`,
        });
      }
    }
    const seen = new Set<string>();
    config.channels.forEach((channel, index) => {
      if (seen.has(channel.name)) {
        ctx.addIssue({
          code: "custom",
          path: ["channels", index, "name"],
          message: `duplicate channel name "${channel.name}"`,
        });
      }
      seen.add(channel.name);
    });
  });

/** The validated configuration, defaults filled in. */
export type Config = z.infer<typeof configSchema>;
/** What a configuration file may contain, before defaults. */
export type ConfigInput = z.input<typeof configSchema>;
export type ChannelConfig = Config["channels"][number];
/** The `webhooks` section, defaults filled in. */
export type WebhooksConfig = Config["webhooks"];
