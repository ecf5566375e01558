import { z } from "zod";
import { describeDeployment } from "./deployment.js";
import { authSchema } from "./schema/auth-schema.js";
import { channelSchema } from "./schema/channel-schema.js";
import { checkListenersAndKeys } from "./schema/config-rules.js";
import { checkPlaceholderSecrets } from "./schema/placeholder-secrets.js";
import { consoleSchema } from "./schema/console-schema.js";
import { eventsSchema } from "./schema/events-schema.js";
import { groupSchema } from "./schema/group-schema.js";
import { imageTasksSchema } from "./schema/image-tasks-schema.js";
import { imagesSchema } from "./schema/images-schema.js";
import { loggingSchema } from "./schema/logging-schema.js";
import { metricsSchema } from "./schema/metrics-schema.js";
import { serverSchema } from "./schema/server-schema.js";
import { storeSchema } from "./schema/store-schema.js";
import { tracingSchema } from "./schema/tracing-schema.js";
import { webhooksSchema } from "./schema/webhooks-schema.js";

export { webhooksSchema };

/** The whole configuration file. */
export const configSchema = z
  .object({
    server: serverSchema,
    store: storeSchema,
    auth: authSchema,
    groups: z.record(z.string(), groupSchema, { error: "must map group names to {models}" }).meta({
      description:
        "Groups by name: the models their keys may see and use. Every key and JWT belongs to one.",
    }),
    channels: z
      .array(channelSchema, { error: "must list at least one channel" })
      .min(1, "must list at least one channel")
      .meta({
        description:
          "The upstream OpenAI-compatible gateways and providers (or the built-in demo channel). " +
          "Several may serve one model: the lowest `priority` is tried first, `weight` spreads " +
          "load within one priority.",
      }),
    imageTasks: imageTasksSchema,
    images: imagesSchema,
    events: eventsSchema,
    webhooks: webhooksSchema,
    metrics: metricsSchema,
    logging: loggingSchema,
    tracing: tracingSchema,
    console: consoleSchema,
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
    config.auth.keys.forEach((key, index) => {
      // A receiver that could never be sent anything: signing needs the secret.
      if (key.webhookUrl && !config.webhooks.secret) {
        ctx.addIssue({
          code: "custom",
          path: ["auth", "keys", index, "webhookUrl"],
          message:
            "needs webhooks.secret (or WEBHOOKS_SECRET): events are sent signed, and only then",
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
      // On a shared store the sealed keys live in Redis: their key must not live there too.
      if (
        forward.secret === undefined &&
        /^rediss?(\+sentinel|\+cluster)?:\/\//.test(config.store.url)
      ) {
        ctx.addIssue({
          code: "custom",
          path: ["auth", "forward", "secret"],
          message:
            "required with a redis:// store: it seals users' gateway keys, which Redis keeps while " +
            "their tasks are unfinished, so it must not be kept there too; make one with " +
            "`openssl rand -base64 48` and set it here (e.g. secret: ${FORWARD_SECRET})",
        });
      }
    }
    // Public links are served by whatever serves the bucket or directory; memory has nothing.
    if (config.images.links === "public" && describeDeployment(config).images.kind === "memory") {
      ctx.addIssue({
        code: "custom",
        path: ["images", "links"],
        message:
          "public links need an image store something else can serve (a file:// directory or " +
          "s3://); memory:// images can only be reached through the service (links: service)",
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
    checkListenersAndKeys(config, ctx);
    checkPlaceholderSecrets(config, ctx);
  })
  // What the URLs mean, worked out once: nothing else reads a scheme.
  .transform((config) => ({
    ...config,
    // A default worked out from another section: the drain outlasts the longest generation.
    server: {
      ...config.server,
      shutdownGraceSec: config.server.shutdownGraceSec ?? config.imageTasks.timeoutSec + 30,
    },
    deployment: describeDeployment(config),
  }))
  .meta({
    title: "image-task-sidecar configuration",
    description:
      "The configuration file of image-task-sidecar (YAML). `${VAR}` and `${VAR:-default}` are " +
      "replaced by environment variables.",
  });

/** The validated configuration, defaults filled in. */
export type Config = z.infer<typeof configSchema>;
/** What a configuration file may contain, before defaults. */
export type ConfigInput = z.input<typeof configSchema>;
export type ChannelConfig = Config["channels"][number];
/** The `webhooks` section, defaults filled in. */
export type WebhooksConfig = Config["webhooks"];
