import { z } from "zod";
import { fromText, modelPatterns, origin, positiveInt, url } from "./field-types.js";

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
    /**
     * Seconds a synchronous image call (`/v1/images/generations`, edits, variations) waits on
     * a silent channel. Image tasks wait up to their own `imageTasks.timeoutSec`. Default 600.
     */
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
