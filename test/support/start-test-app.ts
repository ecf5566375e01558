import { pino, type Logger } from "pino";
import type { TracingOptions } from "../../src/tracing/tracing-options.js";
import { parseConfig } from "../../src/config/load-config.js";
import type { Config, ConfigInput } from "../../src/config/config-schema.js";
import { startServer, type RunningServer } from "../../src/server.js";
import { startFakeUpstream, type FakeUpstream } from "./fake-upstream.js";
import { REDIS_URL, deleteKeys, imagesDirOf, uniquePrefix } from "./redis.js";

/** Keys every test app knows. */
export const TEST_KEYS = {
  /** group `default`: gpt-4o-mini and gpt-image-* */
  default: "sk-test-default-0001",
  /** group `default` too, another owner */
  other: "sk-test-default-0002",
  /** group `vip`: everything */
  vip: "sk-test-vip-0001",
  /** group `chat`: gpt-4o-mini only */
  chat: "sk-test-chat-0001",
} as const;

/** The channel key the test upstream expects; it must never reach a client. */
export const UPSTREAM_KEY = "sk-upstream-secret-do-not-leak";

export interface TestAppOptions {
  /** The fake channel; default: a fresh one, closed with the app. */
  upstream?: FakeUpstream;
  imageTasks?: Partial<Config["imageTasks"]>;
  /** Replaces the store URL (default memory://). */
  storeUrl?: string;
  /**
   * Runs on the shared Redis under a key prefix: a fresh one (`true`, its keys
   * deleted when the app closes) or a given one (several apps on one prefix
   * are replicas of one deployment; the test deletes its keys).
   */
  redis?: boolean | { prefix: string };
  /** Merged over the generated config (shallow, per top-level section). */
  config?: Partial<ConfigInput>;
  /** Node's process metrics on /metrics too. Default false. */
  defaultMetrics?: boolean;
  /** The service's logger. Default: silent. */
  logger?: Logger;
  /** Trace export. Default: off. */
  tracing?: TracingOptions;
}

export interface TestApp {
  url: string;
  /** `url` + `/v1`: the base URL for the openai SDK. */
  baseURL: string;
  /** A key of group `default` (gpt-4o-mini, gpt-image-*). */
  key: string;
  /** A key of group `vip` (all models). */
  vipKey: string;
  upstream: FakeUpstream;
  config: Config;
  server: RunningServer;
  /** Stops the service (and the upstream, when the app started it). */
  close(): Promise<void>;
}

/** The config a test app runs with, in front of `upstreamBaseUrl`. */
export function testConfig(upstreamBaseUrl: string, options: TestAppOptions = {}): Config {
  const store =
    typeof options.redis === "object"
      ? { url: REDIS_URL, prefix: options.redis.prefix }
      : { url: options.storeUrl ?? "memory://" };
  const input: ConfigInput = {
    // Idle connections kept past any pause of a test's own: at the default 5 s, a client that
    // reuses one as the service closes it reads ECONNRESET (a loaded CI machine stalled a test's
    // fetch client that long between two calls). Tests of the timeout set their own.
    server: { port: 0, host: "127.0.0.1", shutdownGraceSec: 2, keepAliveTimeoutSec: 60 },
    store,
    auth: {
      keys: [
        { key: TEST_KEYS.default, group: "default" },
        { key: TEST_KEYS.other, group: "default" },
        { key: TEST_KEYS.vip, group: "vip" },
        { key: TEST_KEYS.chat, group: "chat" },
      ],
    },
    groups: {
      default: { models: ["gpt-4o-mini", "gpt-image-*"] },
      vip: { models: ["*"] },
      chat: { models: ["gpt-4o-mini"] },
    },
    channels: [
      {
        name: "fake",
        baseUrl: upstreamBaseUrl,
        apiKey: UPSTREAM_KEY,
        models: ["gpt-4o-mini", "gpt-4o", "gpt-image-1", "dall-e-3"],
      },
    ],
    imageTasks: { pollIntervalSec: 1, ...options.imageTasks },
    logging: { level: "silent" },
    // Apps on one Redis prefix are replicas: they share an image directory, deleted with the keys.
    ...(typeof options.redis === "object"
      ? { images: { url: `file://${imagesDirOf(options.redis.prefix)}` } }
      : {}),
    ...options.config,
  };
  return parseConfig(input);
}

/**
 * Starts the real service on a free port in front of a fake upstream (a real
 * socket), with silent logs. Every test owns its app and closes it.
 */
export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const ownUpstream = !options.upstream;
  const upstream = options.upstream ?? (await startFakeUpstream());
  const ownPrefix = options.redis === true ? uniquePrefix("app") : undefined;
  const config = testConfig(upstream.baseUrl, {
    ...options,
    redis: ownPrefix ? { prefix: ownPrefix } : options.redis,
  });
  const server = await startServer({
    config,
    logger: options.logger ?? testLogger(),
    defaultMetrics: options.defaultMetrics ?? false,
    ...(options.tracing ? { tracing: options.tracing } : {}),
  });
  return {
    url: server.url,
    baseURL: `${server.url}/v1`,
    key: TEST_KEYS.default,
    vipKey: TEST_KEYS.vip,
    upstream,
    config,
    server,
    async close() {
      await server.close(500);
      if (ownUpstream) await upstream.close();
      if (ownPrefix) await deleteKeys(ownPrefix);
    },
  };
}

/**
 * Silent, unless `TEST_APP_LOG` names a path prefix: each app then writes its debug log to a
 * file of its own under it (`<prefix>.<pid>.<ms>`), to read what a failing run did.
 */
function testLogger(): Logger {
  const prefix = process.env.TEST_APP_LOG;
  if (!prefix) return pino({ level: "silent" });
  return pino({ level: "debug" }, pino.destination(`${prefix}.${process.pid}.${Date.now()}`));
}
