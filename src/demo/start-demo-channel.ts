import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createDemoChannelHandler } from "./create-demo-channel-handler.js";
import { createDemoJobs } from "./demo-background-jobs.js";
import { createDemoResponseStore } from "./demo-response-store.js";

export { DEMO_MODELS } from "./demo-models.js";

/** How the demo channel behaves. */
export interface DemoChannelOptions {
  /** How long each image generation takes, so the async task API has something to wait for. */
  imageDelayMs: number;
  /** Interface to listen on; default 127.0.0.1 so the demo is never reachable from outside. */
  host?: string;
}

/** A running demo channel. */
export interface DemoChannel {
  /** OpenAI base URL, e.g. `http://127.0.0.1:PORT/v1`, to configure as a channel's `baseUrl`. */
  baseUrl: string;
  /**
   * Stops listening and drops open connections, including pending image generations, and
   * forgets the responses and jobs it kept.
   */
  close(): Promise<void>;
}

/**
 * Starts the built-in demo channel on a free port. It is a real HTTP server rather than a shortcut
 * inside the proxy, so the demo exercises the same routing, streaming and error paths as a real
 * gateway does.
 */
export async function startDemoChannel(options: DemoChannelOptions): Promise<DemoChannel> {
  const host = options.host ?? "127.0.0.1";
  const responses = createDemoResponseStore();
  const jobs = createDemoJobs();
  const server = createServer(
    createDemoChannelHandler({ imageDelayMs: options.imageDelayMs, responses, jobs }),
  );
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const urlHost = host.includes(":") ? `[${host}]` : host;

  let closing: Promise<void> | undefined;
  return {
    baseUrl: `http://${urlHost}:${port}/v1`,
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        responses.clear();
        jobs.clear();
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
