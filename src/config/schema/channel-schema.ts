import { z } from "zod";
import { fromText, modelPatterns, origin, positiveInt, url } from "./field-types.js";

/** The async image APIs a channel may speak (`channels[].async`). */
export const ASYNC_DIALECTS = ["sub2api", "bifrost", "openai-background"] as const;
/** One of {@link ASYNC_DIALECTS}. */
export type AsyncDialect = (typeof ASYNC_DIALECTS)[number];
/** How a channel takes the Responses API's background mode. */
const channelResponsesSchema = z
  .object({
    background: z
      .enum(["own", "native"], { error: "must be own or native" })
      .default("own")
      .meta({
        description:
          "`own` (default): a `POST /v1/responses` with `background: true` that this channel " +
          "would serve runs as a task of the service, which calls the channel with a normal " +
          "streamed request and answers retrieve, cancel, delete and stream resumption itself " +
          "(most gateways do not implement background mode). `native`: `background: true` is " +
          "sent on to the channel (OpenAI itself, or a gateway that implements it), and its " +
          "response ids are followed to it as any other passed-through response.",
      }),
  })
  .strict()
  .prefault({})
  .meta({ description: "How the channel takes the Responses API's background mode." });

/** An upstream OpenAI-compatible gateway or provider. */
export const channelSchema = z
  .object({
    name: z
      .string({ error: "must be a name" })
      .regex(/^[A-Za-z0-9_.-]{1,64}$/, "must be 1-64 letters, digits, '_', '.' or '-'")
      .meta({ description: "Unique name, used in logs and metric labels." }),
    type: z
      .enum(["openai", "demo"], { error: "must be openai or demo" })
      .default("openai")
      .meta({
        description:
          "`openai`: any OpenAI-compatible HTTP API at `baseUrl`. `demo`: the built-in demo " +
          "channel, started in-process on `127.0.0.1`; needs no `baseUrl`.",
      }),
    baseUrl: url.optional().meta({
      description:
        "The channel's `/v1` base URL, e.g. `http://127.0.0.1:3000/v1`. Required for `openai` " +
        "channels.",
    }),
    apiKey: z
      .string()
      .optional()
      .meta({
        description:
          "Sent upstream as `Authorization: Bearer <apiKey>`; never logged or returned. " +
          "Default: none (a forward-mode channel without one serves forward keys only).",
      }),
    models: modelPatterns.meta({
      description:
        "Model ids and `*` globs the channel serves; a glob is resolved from the channel's own " +
        "`/v1/models`.",
    }),
    priority: fromText(z.number({ error: "must be a number" }).int("must be an integer"))
      .default(0)
      .meta({ description: "Channels with the lowest value are tried first." }),
    weight: fromText(z.number({ error: "must be a number" }).positive("must be > 0"))
      .default(1)
      .meta({
        description: "Share of traffic among the channels of one priority (weighted random order).",
      }),
    timeoutSec: positiveInt("seconds")
      .default(120)
      .meta({
        description:
          "Seconds the channel may stay silent, before its answer starts and between chunks " +
          "of it, on every passthrough route but the image ones: 504 `upstream_timeout` before " +
          "the first byte, a closed stream after it.",
      }),
    imageTimeoutSec: positiveInt("seconds")
      .default(600)
      .meta({
        description:
          "The same silence limit on the synchronous image routes (`/v1/images/generations`, " +
          "edits, variations). Image tasks wait up to their own `imageTasks.timeoutSec`.",
      }),
    modelsCacheSec: positiveInt("seconds")
      .default(60)
      .meta({ description: "Seconds a fetched `/v1/models` list is reused." }),
    imageUrlOrigins: z
      .array(origin, { error: "must be a list of origins" })
      .default([])
      .meta({
        description:
          "Origins besides the channel's own that image URLs in its answers are downloaded from " +
          "(e.g. its CDN, `https://cdn.example.com`). Downloads from these never reach " +
          "loopback, private, link-local or metadata addresses (checked on the URL and again " +
          "on the address connected to); redirects are never followed.",
      }),
    maxImageBytes: positiveInt("bytes")
      .default(32 * 1024 * 1024)
      .meta({
        description:
          "Largest image accepted from the channel, decoded from `b64_json` or downloaded from " +
          "a `url`, in bytes (32 MiB by default); its whole answer may hold `n` such images.",
      }),
    imageDelayMs: fromText(z.number().int().min(0, "must be >= 0"))
      .default(3000)
      .meta({ description: "Demo channel only: how long drawing an image takes, in ms." }),
    async: z
      .enum(ASYNC_DIALECTS, { error: "must be sub2api, bifrost or openai-background" })
      .optional()
      .meta({
        description:
          "The channel runs an image task's generation as a job of its own, which the service " +
          "submits once and then polls by id, so no call is held open for minutes and a " +
          "replica that stops hands the poll to another instead of running the generation " +
          "again. `sub2api`: `POST /images/generations/async` (edits: `/images/edits/async`), " +
          "polled at `GET /images/tasks/{id}`. `bifrost`: `POST /async/images/generations` (or " +
          "edits), polled at `GET /async/images/generations/{id}`. `openai-background`: a " +
          "Responses call with `background: true` and the `image_generation` tool, polled at " +
          "`GET /responses/{id}` and cancelled at `POST /responses/{id}/cancel`. Default: none " +
          "(the call is held open until the channel answers).",
      }),
    pollSec: positiveInt("seconds")
      .default(3)
      .meta({
        description:
          "With `async`: seconds between two polls of a job (never sooner than a " +
          "`Retry-After` the channel sent).",
      }),
    responsesModel: z
      .string({ error: "must be a model id" })
      .min(1, "must be a model id")
      .optional()
      .meta({
        description:
          "With `async: openai-background`, required: the Responses model that calls the " +
          "`image_generation` tool (e.g. `gpt-4.1-mini`); the task's image model and " +
          "parameters go in the tool.",
      }),
    // Background responses (`POST /v1/responses` with `background: true`).
    responses: channelResponsesSchema,
  })
  .strict()
  .superRefine((channel, ctx) => {
    if (channel.type === "openai" && !channel.baseUrl) {
      ctx.addIssue({ code: "custom", path: ["baseUrl"], message: "must be a URL" });
    }
    if (channel.async === "openai-background" && !channel.responsesModel) {
      ctx.addIssue({
        code: "custom",
        path: ["responsesModel"],
        message: "required with async: openai-background (the Responses model that runs the tool)",
      });
    }
  });
