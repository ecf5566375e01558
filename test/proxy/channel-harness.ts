import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { afterEach } from "vitest";
import type { ChannelConfig, ConfigInput } from "../../src/config/config-schema.js";
import { startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";
import { startTestApp, UPSTREAM_KEY, type TestApp } from "../support/start-test-app.js";

// Channels and apps the tests of a file start, closed after each test.
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

export const messages = [{ role: "user" as const, content: "hi" }];
export const MODELS = ["gpt-4o-mini", "gpt-4o", "gpt-image-1", "dall-e-3"];

export async function upstream(name: string): Promise<FakeUpstream> {
  const fake = await startFakeUpstream({ name });
  cleanups.push(() => fake.close());
  return fake;
}

/** A fake that is closed again: its port refuses connections. */
export async function refusingBaseUrl(): Promise<string> {
  const fake = await startFakeUpstream({ name: "gone" });
  await fake.close();
  return fake.baseUrl;
}

export type ChannelInput = Partial<ChannelConfig> & { name: string; baseUrl: string };

export async function appWith(channels: ChannelInput[]): Promise<TestApp> {
  const fallback = await upstream("unused");
  const app = await startTestApp({
    upstream: fallback,
    config: {
      channels: channels.map((channel) => ({
        apiKey: UPSTREAM_KEY,
        models: MODELS,
        ...channel,
      })) as ConfigInput["channels"],
    },
  });
  cleanups.push(() => app.close());
  return app;
}

export function clientOf(app: TestApp): OpenAI {
  return new OpenAI({ apiKey: app.key, baseURL: app.baseURL, maxRetries: 0 });
}

export function postChat(app: TestApp, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${app.baseURL}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${app.key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
}

/** A bare channel answering every request with `handler`: for answers the fake cannot give. */
export async function rawChannel(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.once("end", () => handler(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}

export async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}
