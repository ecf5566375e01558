import OpenAI from "openai";
import { pino } from "pino";
import { loadConfig } from "../../src/config/load-config.js";
import { startServer, type RunningServer } from "../../src/server.js";

/** The demo service a test file talks to, and how. */
export interface DemoService {
  server: RunningServer;
  /** The first key of config/default.yaml. */
  key: string;
  client: OpenAI;
  /** The service's `/v1` base URL. */
  baseURL: string;
}

/**
 * The service as `npm start` runs it (config/default.yaml), on a free port, in memory, with a
 * short image delay: every route a user can try with no account.
 */
export async function startDemoService(): Promise<DemoService> {
  const { config } = loadConfig({ env: { PORT: "0", STORE_URL: "memory://" } });
  config.channels = config.channels.map((channel) => ({ ...channel, imageDelayMs: 20 }));
  const server = await startServer({
    config,
    logger: pino({ level: "silent" }),
    defaultMetrics: false,
  });
  const key = config.auth.keys[0]!.key;
  const baseURL = `${server.url}/v1`;
  return { server, key, baseURL, client: new OpenAI({ apiKey: key, baseURL, maxRetries: 0 }) };
}
