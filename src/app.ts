import type { RequestListener } from "node:http";
import type { Logger } from "pino";
import type { Authenticate } from "./auth/create-authenticator.js";
import type { ChannelClient } from "./channels/channel-client.js";
import type { ChannelRegistry } from "./channels/channel-registry.js";
import type { Config } from "./config/config-schema.js";
import { createConsoleLane } from "./console/console-lane.js";
import { createCors } from "./edge/cors.js";
import { createPipeline } from "./edge/create-pipeline.js";
import { createMetricsLane } from "./edge/metrics-lane.js";
import { createHealthLane } from "./health/health-lane.js";
import type { Lane } from "./http/lane.js";
import type { PublicOrigin } from "./http/public-base-url.js";
import { createMcpLane } from "./mcp/mcp-lane.js";
import type { Metrics } from "./metrics/create-metrics.js";
import { createRequestObserver } from "./observability/observe-requests.js";
import { NOOP_TRACER, type Tracer } from "./tracing/tracer.js";
import { createModelsLane } from "./models/models-lane.js";
import type { ModelAccess } from "./models/model-access.js";
import { createPassthrough } from "./proxy/create-passthrough-handler.js";
import { createProxyLane } from "./proxy/create-proxy-lane.js";
import { SMALL_BODY_BYTES } from "./proxy/prepare-request.js";
import type { ResponseOwners } from "./proxy/response-owners.js";
import type { ImageTasks } from "./tasks/create-image-tasks.js";
import { createBackgroundResponses } from "./tasks/http/background-responses.js";
import { createBifrostLane } from "./tasks/http/bifrost-lane.js";
import { createImageFilesLane } from "./tasks/http/image-files-lane.js";
import { createTaskLane, type TaskLaneDeps } from "./tasks/http/create-task-lane.js";
import { createSub2apiLane } from "./tasks/http/sub2api-lane.js";
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
  /** True until start-up finished (tasks earlier processes left picked up): `/readyz` 503. */
  isStarting?: () => boolean;
  /** Each channel's last model-list check, for `/readyz` (see `channels/channel-checks.ts`). */
  channelStatuses?: () => Record<string, string>;
  /** Spans of requests, channel tries and tasks. Default: tracing off. */
  tracer?: Tracer;
}

/**
 * Builds the service's request listener: one pipeline (the edge: request
 * context, auth, errors) in front of the lanes, asked in this order: the
 * OpenAI passthrough (the hot path, first), the task API and the async
 * dialects over it (sub2api's, Bifrost's), image files, models, MCP,
 * health, metrics, the web console. No I/O here or on import,
 * so tests and the server assemble the same app from the same parts.
 */
export function createApp(deps: AppDeps): RequestListener {
  const { config, metrics, logger } = deps;
  return createPipeline({
    lanes: createLanes(deps),
    authenticate: deps.authenticate,
    // Every request: its id, its access line, its metrics and its server span (see RequestContext).
    observe: createRequestObserver({
      metrics,
      logger,
      tracer: deps.tracer ?? NOOP_TRACER,
      accessLog: config.logging.access,
      trustProxy: config.server.trustProxy,
    }),
    cors: createCors(config.server.corsOrigins),
    logger,
  });
}

/** Every lane of the service, in the order the edge asks them. */
function createLanes(deps: AppDeps): Lane[] {
  const { config, metrics, logger, tasks } = deps;
  const { server } = config;
  const limits = bodyLimits(server);
  const origin: PublicOrigin = { configured: server.publicBaseUrl, trustProxy: server.trustProxy };
  const taskLane: TaskLaneDeps = {
    tasks,
    limits,
    pollIntervalSec: config.imageTasks.pollIntervalSec,
    taskLimits: config.imageTasks,
    eventsKeepAliveMs: config.imageTasks.eventsKeepAliveSec * 1000,
    events: config.events,
    origin,
    metrics,
    logger,
  };
  return [
    createProxyLane(createPassthrough(passthroughDeps(deps, limits, origin))),
    createTaskLane(taskLane),
    // The same tasks, as the clients of other gateways submit and poll them.
    createSub2apiLane(taskLane),
    createBifrostLane(taskLane),
    // Signed image URLs work without a bearer header: the signature is the credential.
    createImageFilesLane({ images: tasks.images, signer: tasks.signer }),
    createModelsLane({ access: deps.access }),
    createMcpLane({
      tasks,
      pollIntervalSec: config.imageTasks.pollIntervalSec,
      origin,
      logger,
      body: limits.taskJson,
    }),
    createHealthLane({
      store: tasks.health.store,
      images: tasks.health.images,
      channels: deps.channelStatuses ?? (() => ({})),
      isStopping: deps.isStopping,
      ...(deps.isStarting ? { isStarting: deps.isStarting } : {}),
    }),
    createMetricsLane(metrics, config.metrics, logger),
    // Static pages without a bearer header; the page itself sends the user's key to /v1.
    createConsoleLane({ config, logger }),
  ];
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

/** What the passthrough calls channels with. */
function passthroughDeps(deps: AppDeps, limits: TaskBodyLimits, origin: PublicOrigin) {
  const { config } = deps;
  const { server } = config;
  return {
    client: deps.channelClient,
    registry: deps.registry,
    access: deps.access,
    metrics: deps.metrics,
    logger: deps.logger,
    responseOwners: deps.responseOwners,
    // Background responses the service runs itself, over any channel.
    background: createBackgroundResponses({
      responses: deps.tasks.responses,
      origin,
      events: config.events,
      keepAliveMs: config.imageTasks.eventsKeepAliveSec * 1000,
      timing: limits.timing,
      metrics: deps.metrics,
    }),
    limits: {
      maxBodyBytes: server.maxBodyBytes,
      maxUploadBytes: server.maxUploadBytes,
      bodyTimeoutMs: limits.timing.timeoutMs,
      bodyIdleMs: limits.timing.idleMs,
      maxResponseBytes: server.maxResponseBytes,
    },
  };
}
