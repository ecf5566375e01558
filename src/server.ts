import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { createApp } from "./app.js";
import { createAuthenticate } from "./auth/create-authenticator.js";
import { channelsForOwnKeys, createForwardMode } from "./auth/create-forward-mode.js";
import { resolveForwardSecret } from "./auth/resolve-forward-secret.js";
import { createChannel, type Channel } from "./channels/channel.js";
import { createChannelClient } from "./channels/channel-client.js";
import { createChannelRegistry } from "./channels/channel-registry.js";
import type { Config } from "./config/config-schema.js";
import { startDemoChannel, type DemoChannel } from "./demo/start-demo-channel.js";
import { createClientErrorHandler } from "./http/create-client-error-handler.js";
import type { ImageStore } from "./images/image-store.js";
import { openImageStore } from "./images/open-image-store.js";
import { createLogger } from "./logging/create-logger.js";
import { configSecrets } from "./logging/secret-scrubber.js";
import { createMetrics } from "./metrics/create-metrics.js";
import { startMetricsListener } from "./metrics/start-metrics-listener.js";
import { createModelAccess } from "./models/model-access.js";
import { createResponseOwners } from "./proxy/response-owners.js";
import { createImageTasks, type ImageTasks } from "./tasks/create-image-tasks.js";

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
 * Assembles and starts the whole service: demo channels, the task feature,
 * HTTP app. Tasks a previous process left are picked up once the port is open.
 */
export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  const { config } = options;
  const logger =
    options.logger ?? createLogger(config.logging.level, undefined, configSecrets(config));
  const metrics = createMetrics({ defaultMetrics: options.defaultMetrics });
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
  // Every call to a channel (passthrough, model lists, forward-key checks) goes through it.
  const channelClient = createChannelClient({ metrics, logger });
  // The forward secret is resolved once the task store is open (an earlier version may have
  // left it there, to be moved out): forward mode asks for it only on first use.
  let forwardSecret: Promise<string> | undefined;
  const forward = createForwardMode({
    config,
    channels,
    secret: () => forwardSecret ?? Promise.reject(new Error("the forward secret is not resolved")),
    logger,
    client: channelClient,
  });
  const registry = createChannelRegistry({
    channels: channelsForOwnKeys(channels, forward?.channel),
    logger,
    client: channelClient,
  });
  const access = createModelAccess({
    groups: config.groups,
    registry,
    forwardChannel: forward?.channel,
  });
  // Image bytes live apart from the task store; both are opened here and handed on.
  let imageStore: ImageStore | undefined;
  let tasks: ImageTasks;
  try {
    imageStore = await openImageStore({ config, metrics, logger });
    tasks = await createImageTasks({
      config,
      access,
      sealer: forward?.sealer,
      metrics,
      logger,
      imageStore,
    });
  } catch (err) {
    await Promise.all(demos.map((demo) => demo.close()));
    await imageStore?.close();
    await channelClient.close();
    throw err;
  }
  if (forward) {
    forwardSecret = resolveForwardSecret({
      configured: config.auth.forward?.secret,
      storeUrl: config.store.url,
      meta: tasks,
      logger,
    });
    try {
      await forwardSecret;
    } catch (err) {
      await tasks.stop(0);
      await imageStore.close();
      await Promise.all(demos.map((demo) => demo.close()));
      await channelClient.close();
      throw err;
    }
  }

  let stopping = false;
  const app = createApp({
    config,
    metrics,
    logger,
    authenticate: createAuthenticate(config, forward?.authenticate),
    registry,
    access,
    channelClient,
    tasks,
    responseOwners: createResponseOwners(
      tasks.keyValue("responses", RESPONSE_OWNERS_IN_MEMORY),
      config.imageTasks.retentionSec * 1000,
    ),
    isStopping: () => stopping,
  });

  const server = createServer(app);
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
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  const metricsListener = await startMetricsListener({
    config: config.metrics,
    defaultHost: config.server.host,
    metrics,
    logger,
  });

  // What a previous process left: queued tasks run, interrupted ones run again.
  await tasks.start();

  let closing: Promise<void> | undefined;
  const close = (graceMs = config.server.shutdownGraceSec * 1000) =>
    (closing ??= (async () => {
      stopping = true;
      const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Requests and tasks in flight share one grace period, counted from the signal;
      // a keep-alive connection is closed as soon as its request is answered.
      const cut = setTimeout(() => server.closeAllConnections(), graceMs);
      const idle = setInterval(() => server.closeIdleConnections(), 100);
      await tasks.stop(graceMs, serverClosed);
      await imageStore?.close();
      clearTimeout(cut);
      clearInterval(idle);
      await channelClient.close();
      await Promise.all(demos.map((demo) => demo.close()));
      await metricsListener?.close();
    })());

  return { url, port, server, metricsUrl: metricsListener?.url, close };
}
