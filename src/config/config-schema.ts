import { z } from "zod";

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

/** The HTTP listener. */
export const serverSchema = z
  .object({
    /** Port to listen on. Default 8080; `PORT` overrides it; 0 picks a free port. */
    port: fromText(
      z
        .number({ error: "must be a number" })
        .int("must be an integer")
        .min(0, "must be between 0 and 65535")
        .max(65535, "must be between 0 and 65535"),
    ).default(8080),
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
    /** Largest `multipart/form-data` body (image edits, audio), in bytes. Default 64 MiB. */
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
     * `memory://` (lost on restart) or `sqlite://./path.db` (default in the
     * embedded config). `STORE_URL` overrides it.
     */
    url: z
      .string({ error: "must be a store URL" })
      // redis:// comes with the Redis store; until then check-config must refuse it.
      .regex(
        /^(memory|sqlite):\/\//,
        "must start with memory:// or sqlite:// (redis:// is not supported yet)",
      )
      .default("memory://"),
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
  })
  .strict()
  // Presence, not truthiness: an empty secret is reported by its own field, not twice.
  .refine((jwt) => (jwt.secret !== undefined) !== (jwt.jwksUrl !== undefined), {
    message: "must set exactly one of secret and jwksUrl",
  });

export const authSchema = z
  .object({
    keys: z.array(apiKeySchema).default([]),
    jwt: jwtSchema.optional(),
  })
  .strict()
  .prefault({});

export const groupSchema = z
  .object({
    /** Model ids and `*` globs the group may see and use. */
    models: modelPatterns,
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
    logging: loggingSchema,
  })
  .strict()
  .superRefine((config, ctx) => {
    config.auth.keys.forEach((key, index) => {
      if (!config.groups[key.group]) {
        ctx.addIssue({
          code: "custom",
          path: ["auth", "keys", index, "group"],
          message: `unknown group "${key.group}"`,
        });
      }
    });
    const defaultGroup = config.auth.jwt?.defaultGroup;
    if (defaultGroup && !config.groups[defaultGroup]) {
      ctx.addIssue({
        code: "custom",
        path: ["auth", "jwt", "defaultGroup"],
        message: `unknown group "${defaultGroup}"`,
      });
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
