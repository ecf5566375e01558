import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import Keyv from "keyv";
import type { Logger } from "pino";
import { createApp } from "./app.js";
import { createAuthenticate } from "./auth/create-authenticator.js";
import { createChannel, type Channel } from "./channels/channel.js";
import { createChannelRegistry } from "./channels/channel-registry.js";
import type { Config } from "./config/config-schema.js";
import { startDemoChannel, type DemoChannel } from "./demo/start-demo-channel.js";
import { createImageUrlSigner } from "./files/image-url-signer.js";
import { createClientErrorHandler } from "./http/create-client-error-handler.js";
import { createLogger } from "./logging/create-logger.js";
import { createMetrics } from "./metrics/create-metrics.js";
import { createGroupAccess } from "./models/group-access.js";
import { BoundedMap, createResponseOwners } from "./proxy/response-owners.js";
import { createTaskStore } from "./tasks/store/create-task-store.js";
import { createInProcessQueue } from "./tasks/task-queue.js";
import { createTaskService } from "./tasks/task-service.js";

/**
 * How often expired tasks, images and idempotency keys are deleted from the
 * store, and the store's unfinished tasks are matched against the queue.
 */
const MAINTENANCE_INTERVAL_MS = 60_000;

/** Responses whose owner a single process remembers at most (the oldest are forgotten first). */
const RESPONSE_OWNERS_IN_MEMORY = 100_000;

/** Options of {@link startServer}. */
export interface StartServerOptions {
  config: Config;
  /** Default: a pino logger at `config.logging.level`. */
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
  /**
   * Graceful stop: refuse new connections, let running tasks finish for up to
   * `graceMs` (default `server.shutdownGraceSec`), hand back the rest, close.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * Assembles and starts the whole service: demo channels, store, queue,
 * runner, HTTP app. Tasks a previous process left are picked up once the
 * port is open.
 */
export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  const { config } = options;
  const logger = options.logger ?? createLogger(config.logging.level);
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
  const store = await createTaskStore(config, logger);
  const secret =
    config.server.urlSigningSecret ??
    (await store.getOrSetMeta("url-signing-secret", () => randomBytes(32).toString("base64url")));
  const registry = createChannelRegistry({ channels, logger });
  const access = createGroupAccess(config.groups);
  const queue = createInProcessQueue({ maxConcurrent: config.imageTasks.maxConcurrent });
  const tasks = createTaskService({ config, store, queue, registry, access, metrics, logger });
  metrics.watchQueueDepth(() => queue.depth());

  let stopping = false;
  let selfBaseUrl = "";
  const app = createApp({
    config,
    store,
    metrics,
    logger,
    authenticate: createAuthenticate(config),
    registry,
    access,
    tasks,
    signer: createImageUrlSigner(secret),
    // In this process for now; the shared store of many replicas takes it over later.
    responseOwners: createResponseOwners(
      new Keyv({ store: new BoundedMap(RESPONSE_OWNERS_IN_MEMORY) }),
      config.imageTasks.retentionSec * 1000,
    ),
    selfBaseUrl: () => selfBaseUrl,
    isStopping: () => stopping,
  });

  const server = createServer(app);
  server.on("clientError", createClientErrorHandler());
  // Long generations on the sync route must not be cut by Node's own request timeout.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
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
  selfBaseUrl = `${url}/v1`;

  // What a previous process left: queued tasks run, interrupted ones run again.
  await tasks.reconcile();
  queue.start(tasks.run);
  const maintenance = setInterval(() => {
    store.sweepExpired().catch((err: unknown) => logger.warn({ err }, "expiry sweep failed"));
    tasks.reconcile().catch((err: unknown) => logger.warn({ err }, "task reconcile failed"));
  }, MAINTENANCE_INTERVAL_MS);
  maintenance.unref();

  let closing: Promise<void> | undefined;
  const close = (graceMs = config.server.shutdownGraceSec * 1000) =>
    (closing ??= (async () => {
      stopping = true;
      clearInterval(maintenance);
      const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Requests and tasks in flight share one grace period, counted from the signal;
      // a keep-alive connection is closed as soon as its request is answered.
      const cut = setTimeout(() => server.closeAllConnections(), graceMs);
      const idle = setInterval(() => server.closeIdleConnections(), 100);
      await tasks.stop(graceMs);
      await serverClosed;
      clearTimeout(cut);
      clearInterval(idle);
      await Promise.all(demos.map((demo) => demo.close()));
      await store.close();
    })());

  return { url, port, server, close };
}
