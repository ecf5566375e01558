import OpenAI from "openai";
import { pollPauses } from "../support/poll-pauses.js";
import { slow } from "../support/time-factor.js";
import { waitUntil } from "../tasks/task-api.js";
import type { Response, ResponseStreamEvent } from "openai/resources/responses/responses";
import type { TestApp } from "../support/start-test-app.js";

/** The official SDK against the service, with the given key (default the app's), no retries. */
export function sdk(target: { baseURL: string; key: string }, key = target.key): OpenAI {
  return new OpenAI({ apiKey: key, baseURL: target.baseURL, maxRetries: 0, timeout: 30_000 });
}

/** The SDK's `baseURL` and key of a served process (`url` without `/v1`). */
export function targetOf(url: string, key: string): { baseURL: string; key: string } {
  return { baseURL: `${url}/v1`, key };
}

/** Retrieves the response until its status is one of `statuses` (a generous deadline for a loaded machine). */
export async function retrieveUntil(
  client: OpenAI,
  id: string,
  statuses: readonly string[],
  timeoutMs = 30_000,
): Promise<Response> {
  // As the test's own timeout (vitest.config.ts): a loaded machine stretches both alike.
  const deadline = Date.now() + slow(timeoutMs);
  const pause = pollPauses();
  for (;;) {
    const response = await client.responses.retrieve(id);
    if (statuses.includes(response.status ?? "")) return response;
    if (Date.now() > deadline) {
      throw new Error(`response ${id} stayed ${response.status}, not ${statuses.join(" or ")}`);
    }
    await pause();
  }
}

/** Waits until `check` holds: the task tests' {@link waitUntil}, with these files' 30 s. */
export function until(check: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  return waitUntil(check, what, timeoutMs);
}

/** What the SDK throws for an error answer: its status and body. */
export async function apiError(
  promise: Promise<unknown>,
): Promise<{ status: number; error: unknown }> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof OpenAI.APIError) return { status: err.status ?? 0, error: err.error };
    throw err;
  }
  throw new Error("the call succeeded");
}

/** The Responses calls the fake channel got. */
export function responseCalls(app: Pick<TestApp, "upstream">) {
  return app.upstream.requests.filter((request) => request.path.startsWith("/v1/responses"));
}

/** Events of an SDK stream until `stop` says so (then the stream is cut) or it ends. */
export async function readEvents(
  stream: AsyncIterable<ResponseStreamEvent> & { controller: AbortController },
  stop: (event: ResponseStreamEvent) => boolean = () => false,
): Promise<ResponseStreamEvent[]> {
  const events: ResponseStreamEvent[] = [];
  for await (const event of stream) {
    events.push(event);
    if (stop(event)) {
      stream.controller.abort();
      break;
    }
  }
  return events;
}
