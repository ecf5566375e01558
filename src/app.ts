import type { RequestListener } from "node:http";
import express, { type Express } from "express";
import type { Logger } from "pino";
import { createAuthMiddleware, type Authenticate } from "./auth/create-authenticator.js";
import type { ChannelClient } from "./channels/channel-client.js";
import type { ChannelRegistry } from "./channels/channel-registry.js";
import type { Config } from "./config/config-schema.js";
import { createConsoleRouter } from "./console/create-console-router.js";
import { createFilesRouter } from "./files/create-files-router.js";
import { createHealthRouter, type RedisReadiness } from "./health/create-health-router.js";
import { createErrorMiddleware, notFoundHandler } from "./http/error-middleware.js";
import { createJsonBody } from "./http/json-body.js";
import { createMcpRouter } from "./mcp/create-mcp-router.js";
import type { Metrics } from "./metrics/create-metrics.js";
import { createMetricsRouter } from "./metrics/create-metrics-router.js";
import { createRequestObserver } from "./observability/observe-requests.js";
import { NOOP_TRACER, type Tracer } from "./tracing/tracer.js";
import { createModelsRouter } from "./models/create-models-router.js";
import type { ModelAccess } from "./models/model-access.js";
import { createPassthrough } from "./proxy/create-passthrough-handler.js";
import { createProxyLane } from "./proxy/create-proxy-lane.js";
import { SMALL_BODY_BYTES } from "./proxy/prepare-request.js";
import type { ResponseOwners } from "./proxy/response-owners.js";
import type { ImageTasks } from "./tasks/create-image-tasks.js";
import { createTaskLane } from "./tasks/http/create-task-lane.js";
import type { TaskBodyLimits } from "./tasks/http/task-answers.js";

/** Everything the HTTP layer needs, built by the caller (see `startServer`). */
export interface AppDeps {
  config: Config;
  metrics: Metrics;
  logger: Logger;
  authenticate: Authenticate;
  registry: ChannelRegistry;
  access: ModelAccess;
  /** Makes the passthrough's calls to channels. */
  channelClient: ChannelClient;
  /** The async image-task feature (service, image reads, store health). */
  tasks: ImageTasks;
  /** Which key and channel created each Responses API object. */
  responseOwners: ResponseOwners;
  /** True once SIGTERM arrived: `/readyz` turns 503. */
  isStopping: () => boolean;
  /** Each channel's last model-list check, for `/readyz` (see `channels/channel-checks.ts`). */
  channelStatuses?: () => Record<string, string>;
  /** Spans of requests, channel tries and tasks. Default: tracing off. */
  tracer?: Tracer;
  /** On Redis: the primary and its last switch, for `/readyz`. */
  redisStatus?: (() => RedisReadiness) | undefined;
}

/**
 * Builds the service's request listener: the proxy lane for the OpenAI
 * passthrough routes, the task lane for polls and submissions, Express for
 * everything else. No I/O here or on import,
 * so tests and the server assemble the same app from the same parts.
 */
export function createApp(deps: AppDeps): RequestListener {
  const { config, metrics, logger } = deps;
  const limits = bodyLimits(config.server);
  const app = createExpressApp(deps, limits);
  const lane = createPassthroughLane(deps, limits);
  const taskLane = createTaskLane({
    authenticate: deps.authenticate,
    tasks: deps.tasks,
    limits,
    pollIntervalSec: config.imageTasks.pollIntervalSec,
    eventsKeepAliveMs: config.imageTasks.eventsKeepAliveSec * 1000,
    events: config.events,
    origin: { configured: config.server.publicBaseUrl, trustProxy: config.server.trustProxy },
    metrics,
    logger,
  });
  // Every request: its id, its access line, its metrics and its server span (see RequestContext).
  const observe = createRequestObserver({
    metrics,
    logger,
    tracer: deps.tracer ?? NOOP_TRACER,
    accessLog: config.logging.access,
  });
  return (req, res) => {
    const context = observe(req, res);
    if (!lane(req, res, context) && !taskLane(req, res, context)) app(req, res);
  };
}

/** The body limits the routes share, from `server`. */
function bodyLimits(server: Config["server"]): TaskBodyLimits {
  const timing = {
    timeoutMs: server.bodyTimeoutSec * 1000,
    idleMs: server.bodyIdleSec * 1000,
  };
  return {
    timing,
    taskJson: { limit: Math.min(SMALL_BODY_BYTES, server.maxBodyBytes), ...timing },
    // An edit task's JSON carries its images as data: URLs.
    uploadJson: { limit: server.maxUploadBytes, ...timing },
    maxUploadBytes: server.maxUploadBytes,
  };
}

/**
 * Express with everything the lanes leave to it: metrics, health, `/metrics`,
 * the files route, the web console, then (behind bearer auth) models, the task routes and
 * `/mcp`, the 404 and the one error middleware.
 */
function createExpressApp(deps: AppDeps, limits: TaskBodyLimits): Express {
  const { config, metrics, logger } = deps;
  const { server } = config;
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  app.set("trust proxy", server.trustProxy);

  const auth = createAuthMiddleware(deps.authenticate);
  const taskJson = createJsonBody(limits.taskJson);

  app.use(
    createHealthRouter({
      store: deps.tasks.health.store,
      images: deps.tasks.health.images,
      channels: deps.channelStatuses ?? (() => ({})),
      isStopping: deps.isStopping,
      redis: deps.redisStatus,
    }),
  );
  app.use(createMetricsRouter(metrics, config.metrics, logger));
  // Signed image URLs work without a bearer header: the signature is the credential.
  app.use(createFilesRouter({ images: deps.tasks.images, signer: deps.tasks.signer }));
  // Static pages without a bearer header; the page itself sends the user's key to /v1.
  app.use(createConsoleRouter({ config, logger }));

  app.use("/v1", auth);
  app.use(createModelsRouter({ access: deps.access }));
  app.use(
    "/mcp",
    auth,
    // Read here, under the service's size and time limits: the MCP transport would read the
    // body itself without a deadline, so a client trickling bytes could hold a request forever.
    taskJson,
    createMcpRouter({
      tasks: deps.tasks,
      pollIntervalSec: config.imageTasks.pollIntervalSec,
      origin: { configured: server.publicBaseUrl, trustProxy: server.trustProxy },
      logger,
    }),
  );

  app.use(notFoundHandler);
  app.use(createErrorMiddleware(logger));
  return app;
}

/** The proxy lane with its passthrough: every OpenAI route that names a model. */
function createPassthroughLane(deps: AppDeps, limits: TaskBodyLimits) {
  const { metrics, logger } = deps;
  const { server } = deps.config;
  return createProxyLane({
    authenticate: deps.authenticate,
    logger,
    passthrough: createPassthrough({
      client: deps.channelClient,
      registry: deps.registry,
      access: deps.access,
      metrics,
      logger,
      responseOwners: deps.responseOwners,
      limits: {
        maxBodyBytes: server.maxBodyBytes,
        maxUploadBytes: server.maxUploadBytes,
        bodyTimeoutMs: limits.timing.timeoutMs,
        bodyIdleMs: limits.timing.idleMs,
        maxResponseBytes: server.maxResponseBytes,
      },
    }),
  });
}
