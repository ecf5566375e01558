import type { RequestListener, Server } from "node:http";
import { hostname } from "node:os";
import type { Logger } from "pino";
import { createApp } from "./app.js";
import { createAuthenticate } from "./auth/create-authenticator.js";
import {
  channelsForOwnKeys,
  createForwardMode,
  type ForwardMode,
} from "./auth/create-forward-mode.js";
import { resolveForwardSecret } from "./auth/resolve-forward-secret.js";
import type { Channel } from "./channels/channel.js";
import { createChannelChecks, type ChannelChecks } from "./channels/channel-checks.js";
import { createChannelClient, type ChannelClient } from "./channels/channel-client.js";
import { createChannelRegistry, type ChannelRegistry } from "./channels/channel-registry.js";
import type { Config } from "./config/config-schema.js";
import { startConfiguredChannels } from "./channels/start-configured-channels.js";
import { createGuardedServer, type ConnectionLimits } from "./http/connection-guard.js";
import { listenOn } from "./net/listen-on.js";
import type { ImageStore } from "./images/image-store.js";
import { openImageStore } from "./images/open-image-store.js";
import { createLogger } from "./logging/create-logger.js";
import { configSecrets } from "./logging/secret-scrubber.js";
import { createMetrics, type Metrics } from "./metrics/create-metrics.js";
import { followRedisPrimary } from "./metrics/redis-metrics.js";
import { startMetricsListener } from "./edge/start-metrics-listener.js";
import { createModelAccess, type ModelAccess } from "./models/model-access.js";
import { createResponseOwners } from "./proxy/response-owners.js";
import { createImageTasks, type ImageTasks } from "./tasks/create-image-tasks.js";
import { upgradeLegacyData } from "./tasks/legacy/upgrade-legacy-data.js";
import { openTaskBackend, type TaskBackend } from "./tasks/open-task-backend.js";
import { startTracer } from "./tracing/start-tracer.js";
import type { Tracer } from "./tracing/tracer.js";
import type { TracingOptions } from "./tracing/tracing-options.js";

/** Responses whose owner one process remembers at most, on the embedded stores (oldest go first). */
const RESPONSE_OWNERS_IN_MEMORY = 100_000;

/** Options of {@link startServer}. */
export interface StartServerOptions {
  config: Config;
  /** Default: a pino logger at `config.logging.level` that masks the config's secrets. */
  logger?: Logger;
  /** Default metrics include process metrics; tests may turn them off. */
  defaultMetrics?: boolean;
  /** Trace export (the standard `OTEL_*` variables, see `loadConfig`); default off. */
  tracing?: TracingOptions;
}

/** A listening service. */
export interface RunningServer {
  /** `http://127.0.0.1:PORT` when bound to all interfaces, else the bound host. */
  url: string;
  port: number;
  server: Server;
  /** The separate `/metrics` listener's `http://HOST:PORT`, when `metrics.port` is set. */
  metricsUrl?: string;
  /**
   * Graceful stop: refuse new connections, let running tasks finish for up to
   * `graceMs` (default `server.shutdownGraceSec`), hand back the rest, close.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * Closers of what start-up opened so far, run in reverse order when a later
 * step fails: a start-up that fails leaves no port, store or file lock open,
 * so the caller can start again in this process.
 */
class OpenedParts {
  private readonly closers: Array<() => Promise<void>> = [];

  /** Remembers `closer` for a failure, and hands `part` back. */
  keep<T>(part: T, closer: (part: T) => Promise<void>): T {
    this.closers.push(() => closer(part));
    return part;
  }

  async closeAll(): Promise<void> {
    for (const closer of this.closers.splice(0).reverse()) await closer().catch(() => undefined);
  }
}

/** What {@link buildService} made: everything the running service holds. */
interface ServiceParts {
  config: Config;
  metrics: Metrics;
  logger: Logger;
  tracer: Tracer;
  channelClient: ChannelClient;
  /** The channel checks' own client (see {@link ChannelChecks}). */
  checkClient: ChannelClient;
  imageStore: ImageStore;
  backend: TaskBackend;
  tasks: ImageTasks;
  routing: Routing;
  /** Every channel's model list, fetched at start-up and every minute. */
  channelChecks: ChannelChecks;
  /** Demo channels and other parts closed last. */
  closeChannels: () => Promise<void>;
}

/**
 * Assembles and starts the whole service, each step on what the ones before
 * made: channels (demo ones started here), the image store, the task backend
 * (store, queue, bus) with the upgrade of what earlier releases left in it,
 * forward mode on its resolved secret, who may use which model, the task
 * feature, the HTTP app and its listener; then tasks a previous process left
 * are picked up. A step that fails closes what the steps before it opened.
 */
export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  const { config } = options;
  const base =
    options.logger ?? createLogger(config.logging.level, undefined, configSecrets(config));
  // Which replica wrote a line (task lines above all): set, or this host and process.
  const replica = config.server.replicaName ?? `${hostname()}:${process.pid}`;
  const logger = base.child({ replica });
  const metrics = createMetrics({ defaultMetrics: options.defaultMetrics });
  const opened = new OpenedParts();
  try {
    const tracer = opened.keep(
      await startTracer(options.tracing, {
        replica,
        trustParent: config.tracing.trustParent,
        logger,
      }),
      (started) => started.shutdown(),
    );
    const parts = await buildService(opened, { config, metrics, logger, tracer });
    const state: ServerState = { parts, stopping: false, starting: true };
    const limits = connectionLimits(config.server);
    const server = opened.keep(
      createGuardedServer(createServiceApp(state), {
        limits,
        onRefused: (reason) => metrics.connectionsRefused.inc({ reason }),
        logger,
      }),
      closeListener,
    );
    state.server = server;
    const { url, port } = await listen(server, config);
    state.metricsListener = opened.keep(
      await startMetricsListener({
        config: config.metrics,
        defaultHost: config.server.host,
        limits,
        metrics,
        logger,
      }),
      (listener) => listener?.close() ?? Promise.resolve(),
    );
    // What a previous process left: queued tasks run, interrupted ones run again.
    await parts.tasks.start();
    state.starting = false;
    opened.keep(parts.channelChecks, async (checks) => checks.stop()).start();
    const close = (graceMs = config.server.shutdownGraceSec * 1000) =>
      (state.closing ??= closeServer(state, graceMs));
    return { url, port, server, metricsUrl: state.metricsListener?.url, close };
  } catch (err) {
    await opened.closeAll();
    throw err;
  }
}

/** What every part is built with. */
interface Basics {
  config: Config;
  metrics: Metrics;
  logger: Logger;
  tracer: Tracer;
}

/** The service's parts, each opened step remembered in `opened` for a failure. */
async function buildService(opened: OpenedParts, basics: Basics): Promise<ServiceParts> {
  const { config, metrics, logger, tracer } = basics;
  const { channels, closeChannels } = await startChannels(opened, config);
  // The passthrough's calls to channels, a glob's model lists and forward-key checks.
  const channelClient = opened.keep(createChannelClient({ metrics, logger }), (client) =>
    client.close(),
  );
  const imageStore = opened.keep(await openImageStore({ config, metrics, logger }), (store) =>
    store.close(),
  );
  // The task feature closes the backend once it is built (its stop drains the queues first).
  let backendOwned = false;
  const backend = opened.keep(
    await openTaskBackend(config, logger.child({ component: "tasks" })),
    (open) => (backendOwned ? Promise.resolve() : open.close()),
  );
  if (backend.redis) followRedisPrimary(metrics, backend.redis);
  await upgradeLegacyData({
    legacy: backend.legacy,
    forwardSecret: backend.forwardSecret,
    imageStore,
    config,
    logger,
  });
  const forwardSecret = config.auth.forward
    ? await resolveForwardSecret({
        configured: config.auth.forward.secret,
        home: backend.forwardSecret,
      })
    : undefined;
  const routing = createRouting(config, channels, channelClient, logger, forwardSecret);
  const tasks = await createImageTasks({
    config,
    access: routing.access,
    sealer: routing.forward?.sealer,
    metrics,
    logger,
    imageStore,
    backend,
    tracer,
  });
  backendOwned = true;
  opened.keep(tasks, (built) => built.stop(0));
  // Pools of their own (as the task runs have): a connection the minute's GET took or opened
  // in the passthrough's pools made V8 recompile the passthrough's path after each check
  // (docs/performance.md, the seventeenth pass).
  const checkClient = opened.keep(createChannelClient({ metrics, logger }), (client) =>
    client.close(),
  );
  const channelChecks = createChannelChecks({ channels, client: checkClient, logger, metrics });
  return {
    config,
    metrics,
    logger,
    tracer,
    channelClient,
    checkClient,
    imageStore,
    backend,
    tasks,
    routing,
    channelChecks,
    closeChannels,
  };
}

/** What the running service holds, and what closing it goes through. */
interface ServerState {
  parts: ServiceParts;
  server?: Server;
  metricsListener?: Awaited<ReturnType<typeof startMetricsListener>>;
  /** Set when closing begins: new passthrough calls and submissions are refused. */
  stopping: boolean;
  /** Until what earlier processes left is picked up: `/readyz` answers 503 `starting`. */
  starting: boolean;
  closing?: Promise<void>;
}

/** The configured channels (see startConfiguredChannels), closed with the rest on a failure. */
async function startChannels(
  opened: OpenedParts,
  config: Config,
): Promise<{ channels: Channel[]; closeChannels: () => Promise<void> }> {
  const { channels, close } = await startConfiguredChannels(config.channels);
  opened.keep(undefined, close);
  return { channels, closeChannels: close };
}

/** Who may use which model on which channel: forward mode (if on), the registry, the access rules. */
interface Routing {
  forward: ForwardMode | undefined;
  registry: ChannelRegistry;
  access: ModelAccess;
}

function createRouting(
  config: Config,
  channels: Channel[],
  client: ChannelClient,
  logger: Logger,
  forwardSecret: string | undefined,
): Routing {
  const forward =
    forwardSecret === undefined
      ? undefined
      : createForwardMode({ config, channels, secret: forwardSecret, logger, client });
  const registry = createChannelRegistry({
    channels: channelsForOwnKeys(channels, forward?.channel),
    logger,
    client,
  });
  const access = createModelAccess({
    groups: config.groups,
    registry,
    forwardChannel: forward?.channel,
  });
  return { forward, registry, access };
}

/** The HTTP app on the opened parts; it refuses new work once `state.stopping` is set. */
function createServiceApp(state: ServerState): RequestListener {
  const { config, routing, tasks, backend } = state.parts;
  return createApp({
    config,
    metrics: state.parts.metrics,
    logger: state.parts.logger,
    authenticate: createAuthenticate(config, routing.forward?.authenticate),
    registry: routing.registry,
    access: routing.access,
    channelClient: state.parts.channelClient,
    tasks,
    responseOwners: createResponseOwners(
      backend.keyValue("responses", RESPONSE_OWNERS_IN_MEMORY),
      config.imageTasks.retentionSec * 1000,
    ),
    isStopping: () => state.stopping,
    isStarting: () => state.starting,
    channelStatuses: () => state.parts.channelChecks.statuses(),
    tracer: state.parts.tracer,
  });
}

/** What bounds every client connection, from `server` (see `createGuardedServer`). */
function connectionLimits(server: Config["server"]): ConnectionLimits {
  return {
    maxConnections: server.maxConnections,
    maxConnectionsPerIp: server.maxConnectionsPerIp,
    trustProxy: server.trustProxy,
    headersTimeoutMs: server.headersTimeoutSec * 1000,
    keepAliveTimeoutMs: server.keepAliveTimeoutSec * 1000,
    body: { timeoutMs: server.bodyTimeoutSec * 1000, idleMs: server.bodyIdleSec * 1000 },
  };
}

/** Listens on `server.host:port`; resolves its URL. */
function listen(server: Server, config: Config): Promise<{ url: string; port: number }> {
  return listenOn(server, config.server.port, config.server.host, {
    port: "server.port (PORT)",
    host: "server.host",
  });
}

/** Closes a listener that may not be listening (a start-up that failed at listen). */
function closeListener(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** {@link RunningServer.close}: requests and tasks share the grace, then everything closes. */
async function closeServer(state: ServerState, graceMs: number): Promise<void> {
  const server = state.server!;
  const { parts } = state;
  state.stopping = true;
  parts.channelChecks.stop();
  const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
  // Requests and tasks in flight share one grace period, counted from the signal;
  // a keep-alive connection is closed as soon as its request is answered.
  const cut = setTimeout(() => server.closeAllConnections(), graceMs);
  const idle = setInterval(() => server.closeIdleConnections(), 100);
  await parts.tasks.stop(graceMs, serverClosed);
  await parts.imageStore.close();
  clearTimeout(cut);
  clearInterval(idle);
  await parts.channelClient.close();
  await parts.checkClient.close();
  await parts.closeChannels();
  await state.metricsListener?.close();
  // What is buffered goes out last, the shutdown's own spans included.
  await parts.tracer.shutdown();
}
