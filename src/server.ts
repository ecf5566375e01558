import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { createApp } from "./app.js";
import { createAuthenticate } from "./auth/create-authenticator.js";
import {
  channelsForOwnKeys,
  createForwardMode,
  type ForwardMode,
} from "./auth/create-forward-mode.js";
import { resolveForwardSecret } from "./auth/resolve-forward-secret.js";
import { createChannel, type Channel } from "./channels/channel.js";
import { createChannelClient, type ChannelClient } from "./channels/channel-client.js";
import { createChannelRegistry, type ChannelRegistry } from "./channels/channel-registry.js";
import type { Config } from "./config/config-schema.js";
import { startDemoChannel, type DemoChannel } from "./demo/start-demo-channel.js";
import { createClientErrorHandler } from "./http/create-client-error-handler.js";
import type { ImageStore } from "./images/image-store.js";
import { openImageStore } from "./images/open-image-store.js";
import { createLogger } from "./logging/create-logger.js";
import { configSecrets } from "./logging/secret-scrubber.js";
import { createMetrics, type Metrics } from "./metrics/create-metrics.js";
import { startMetricsListener, type MetricsListener } from "./metrics/start-metrics-listener.js";
import { createModelAccess, type ModelAccess } from "./models/model-access.js";
import { createResponseOwners } from "./proxy/response-owners.js";
import { createImageTasks, type ImageTasks } from "./tasks/create-image-tasks.js";
import { openTaskBackend, type TaskBackend } from "./tasks/open-task-backend.js";

/** Responses whose owner one process remembers at most, on the embedded stores (oldest go first). */
const RESPONSE_OWNERS_IN_MEMORY = 100_000;

/** Options of {@link startServer}. */
export interface StartServerOptions {
  config: Config;
  /** Default: a pino logger at `config.logging.level` that masks the config's secrets. */
  logger?: Logger;
  /** Default metrics include process metrics; tests may turn them off. */
  defaultMetrics?: boolean;
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
 * Assembles and starts the whole service: channels (demo ones started here),
 * who may use which, the backends (image store, task feature), the HTTP app
 * and its listener. Tasks a previous process left are picked up once the port
 * is open.
 */
export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  const { config } = options;
  const logger =
    options.logger ?? createLogger(config.logging.level, undefined, configSecrets(config));
  const metrics = createMetrics({ defaultMetrics: options.defaultMetrics });
  const { demos, channels } = await startChannels(config);
  // Every call to a channel (passthrough, model lists, forward-key checks) goes through it.
  const channelClient = createChannelClient({ metrics, logger });
  const routing = createRouting(config, channels, channelClient, logger);
  const opened = { config, metrics, logger, demos, channelClient };
  const { imageStore, backend, tasks } = await openBackends(opened, routing);
  const s: ServerState = { ...opened, imageStore, backend, tasks, stopping: false };
  const server = createServer(createServiceApp(s, routing));
  s.server = server;
  let url: string, port: number;
  try {
    ({ url, port } = await listen(server, config));
    s.metricsListener = await startMetricsListener({
      config: config.metrics,
      defaultHost: config.server.host,
      metrics,
      logger,
    });
  } catch (err) {
    // Nothing was served yet: let go of what was opened (the SQLite file's lock too), so the
    // caller can start again in this process.
    await closeServer(s, 0);
    throw err;
  }

  // What a previous process left: queued tasks run, interrupted ones run again.
  await tasks.start();

  const close = (graceMs = config.server.shutdownGraceSec * 1000) =>
    (s.closing ??= closeServer(s, graceMs));
  return { url, port, server, metricsUrl: s.metricsListener?.url, close };
}

/** What the running service holds, and what closing it goes through. */
interface ServerState {
  config: Config;
  metrics: Metrics;
  logger: Logger;
  demos: DemoChannel[];
  channelClient: ChannelClient;
  imageStore: ImageStore;
  /** The task store, queue and bus; closed by `tasks.stop`. */
  backend: TaskBackend;
  tasks: ImageTasks;
  server?: Server;
  metricsListener?: MetricsListener;
  /** Set when closing begins: new passthrough calls and submissions are refused. */
  stopping: boolean;
  closing?: Promise<void>;
}

/** The configured channels; each demo channel is started here, on a port of its own. */
async function startChannels(
  config: Config,
): Promise<{ demos: DemoChannel[]; channels: Channel[] }> {
  const demos: DemoChannel[] = [];
  const channels: Channel[] = [];
  for (const channel of config.channels) {
    if (channel.type === "demo") {
      const demo = await startDemoChannel({ imageDelayMs: channel.imageDelayMs });
      demos.push(demo);
      channels.push(createChannel({ ...channel, baseUrl: demo.baseUrl }));
    } else {
      channels.push(createChannel({ ...channel, baseUrl: channel.baseUrl as string }));
    }
  }
  return { demos, channels };
}

/** Who may use which model on which channel: forward mode (if on), the registry, the access rules. */
interface Routing {
  forward: ForwardMode | undefined;
  registry: ChannelRegistry;
  access: ModelAccess;
  /** Forward mode's root secret, resolved once the task store is open. */
  forwardSecret: { resolved?: Promise<string> };
}

function createRouting(
  config: Config,
  channels: Channel[],
  client: ChannelClient,
  logger: Logger,
): Routing {
  // The forward secret is resolved once the task store is open (an earlier version may have
  // left it there, to be moved out): forward mode asks for it only on first use.
  const forwardSecret: Routing["forwardSecret"] = {};
  const forward = createForwardMode({
    config,
    channels,
    secret: () =>
      forwardSecret.resolved ?? Promise.reject(new Error("the forward secret is not resolved")),
    logger,
    client,
  });
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
  return { forward, registry, access, forwardSecret };
}

/**
 * Opens the image store and the task backend (store, queue and bus), resolves
 * forward mode's secret from the task store, then builds the task feature on
 * them; on failure closes what was opened, the channels too, and rejects.
 */
async function openBackends(
  opened: Pick<ServerState, "config" | "metrics" | "logger" | "demos" | "channelClient">,
  routing: Routing,
): Promise<{ imageStore: ImageStore; backend: TaskBackend; tasks: ImageTasks }> {
  const { config, metrics, logger, demos, channelClient } = opened;
  // Image bytes live apart from the task store; both are opened here and handed on.
  let imageStore: ImageStore | undefined;
  let backend: TaskBackend | undefined;
  try {
    imageStore = await openImageStore({ config, metrics, logger });
    backend = await openTaskBackend(config, logger.child({ component: "tasks" }));
    if (routing.forward) {
      routing.forwardSecret.resolved = resolveForwardSecret({
        configured: config.auth.forward?.secret,
        taskStore: config.deployment.taskStore,
        meta: backend.store,
        logger,
      });
      await routing.forwardSecret.resolved;
    }
    const tasks = await createImageTasks({
      config,
      access: routing.access,
      sealer: routing.forward?.sealer,
      metrics,
      logger,
      imageStore,
      backend,
    });
    return { imageStore, backend, tasks };
  } catch (err) {
    await Promise.all(demos.map((demo) => demo.close()));
    await backend?.close();
    await imageStore?.close();
    await channelClient.close();
    throw err;
  }
}

/** The HTTP app on the opened parts; it refuses new work once `s.stopping` is set. */
function createServiceApp(s: ServerState, routing: Routing): RequestListener {
  const { config, tasks } = s;
  return createApp({
    config,
    metrics: s.metrics,
    logger: s.logger,
    authenticate: createAuthenticate(config, routing.forward?.authenticate),
    registry: routing.registry,
    access: routing.access,
    channelClient: s.channelClient,
    tasks,
    responseOwners: createResponseOwners(
      s.backend.keyValue("responses", RESPONSE_OWNERS_IN_MEMORY),
      config.imageTasks.retentionSec * 1000,
    ),
    isStopping: () => s.stopping,
  });
}

/** Listens on `server.host:port` with the service's connection limits; resolves its URL. */
async function listen(server: Server, config: Config): Promise<{ url: string; port: number }> {
  server.on("clientError", createClientErrorHandler());
  // Long generations on the sync route must not be cut by Node's own request timeout.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  // Beyond it Node closes a new connection at once: idle or slow clients cannot exhaust the process.
  server.maxConnections = config.server.maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.server.port, config.server.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const host = ["0.0.0.0", "::", ""].includes(config.server.host)
    ? "127.0.0.1"
    : config.server.host;
  return { url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`, port };
}

/** {@link RunningServer.close}: requests and tasks share the grace, then everything closes. */
async function closeServer(s: ServerState, graceMs: number): Promise<void> {
  const server = s.server!;
  s.stopping = true;
  const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
  // Requests and tasks in flight share one grace period, counted from the signal;
  // a keep-alive connection is closed as soon as its request is answered.
  const cut = setTimeout(() => server.closeAllConnections(), graceMs);
  const idle = setInterval(() => server.closeIdleConnections(), 100);
  await s.tasks.stop(graceMs, serverClosed);
  await s.imageStore.close();
  clearTimeout(cut);
  clearInterval(idle);
  await s.channelClient.close();
  await Promise.all(s.demos.map((demo) => demo.close()));
  await s.metricsListener?.close();
}
