import { createHmac, randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { expect, onTestFinished } from "vitest";
import { expectNothingLeaked } from "../../http/error-envelope.js";
import { TINY_PNG_B64 } from "../../support/fake-answers.js";
import { slow } from "../../support/time-factor.js";
import { call, PNG_MAGIC, waitUntil, type ApiResponse, type Target } from "../task-api.js";
import { openEvents, type SseStream } from "../sse-client.js";
import type { ChaosAnswer } from "./chaos-channel.js";
import { expectEventsEnd, MODELS, outcome, storyOf } from "./chaos-checks.js";
import { isControl } from "./chaos-control.js";

/*
 * An image task's life, and a background response's, against the random channels (see
 * chaos-channel.ts), as the tests run them: on one service, or submitted to one replica and
 * followed on another.
 */

/** The webhooks' signing secret. */
export const WEBHOOK_SECRET = `whsec_${randomBytes(32).toString("base64")}`;

/** Webhook deliveries, as a receiver that answers 200 to each keeps them. */
interface Delivery {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A webhook receiver on a free port, closed when the test ends. */
export async function startReceiver(): Promise<{ url: string; deliveries: Delivery[] }> {
  const deliveries: Delivery[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      deliveries.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, deliveries };
}

/** A delivery signed with `secret` as Standard Webhooks says, for task `id`, of its end `status`. */
function expectSignedEvent(delivery: Delivery, secret: string, id: string, status: string): void {
  const { headers, body } = delivery;
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  const signed = `${String(headers["webhook-id"])}.${String(headers["webhook-timestamp"])}.${body}`;
  const signature = createHmac("sha256", key).update(signed).digest("base64");
  expect(headers["webhook-signature"]).toBe(`v1,${signature}`);
  const event = JSON.parse(body) as { type: string; data: { id: string } };
  expect(event.type).toBe(`image.task.${status}`);
  expect(event.data.id).toBe(id);
  expectNothingLeaked(body);
}

/**
 * The images task `n` asks for: two for half the tasks without partial images, on every kind of
 * channel (answered whole, a channel's answer of two with one good image completes it), else one.
 */
function imagesAsked(n: number): number {
  return (n % 4 === 1 || n % 4 === 2) && !asksPartials(n) ? 2 : 1;
}

/**
 * Every fourth task, half the held channels' (streamed, so a stream's end can go wrong) and half
 * the background channel's (streamed, so drafts come as events).
 */
function asksPartials(n: number): boolean {
  return n % 4 === 0 || n % 6 === 3 || n % 6 === 5;
}

/** Submits task `n`: a generation or an edit, streamed partials or not, b64 or url. */
async function submit(app: Target, n: number, hookUrl: string): Promise<ApiResponse> {
  const model = MODELS[n % MODELS.length]!;
  const prompt = `chaos #${n} a lighthouse`;
  const extra = {
    webhook_url: hookUrl,
    ...(asksPartials(n) ? { partial_images: 2 } : {}),
    ...(imagesAsked(n) > 1 ? { n: imagesAsked(n) } : {}),
    response_format: n % 2 === 0 ? "b64_json" : "url",
  };
  if (n % 5 !== 3)
    return call(app, "POST", "/v1/images/tasks", { json: { model, prompt, ...extra } });
  const form = new FormData();
  form.append("model", model);
  form.append("prompt", prompt);
  for (const [name, value] of Object.entries(extra)) form.append(name, String(value));
  form.append(
    "image",
    new Blob([Buffer.from(TINY_PNG_B64, "base64")], { type: "image/png" }),
    "in.png",
  );
  const response = await fetch(`${app.url}/v1/images/edits/tasks`, {
    method: "POST",
    headers: { authorization: `Bearer ${app.key}` },
    body: form,
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: JSON.parse(text), text };
}

/** A completed task's images, read as a client reads them: each one a PNG. */
async function expectImages(app: Target, answer: ApiResponse): Promise<void> {
  const data = answer.body.data ?? [];
  expect(data.length, answer.text).toBeGreaterThan(0);
  for (const item of data) {
    let bytes: Buffer;
    if (item.b64_json) {
      bytes = Buffer.from(item.b64_json, "base64");
    } else {
      const response = await fetch(new URL(item.url!, app.url), {
        headers: { authorization: `Bearer ${app.key}` },
      });
      expect(response.status, item.url).toBe(200);
      bytes = Buffer.from(await response.arrayBuffer());
    }
    expect(bytes.subarray(0, 8), answer.text).toEqual(PNG_MAGIC);
  }
}

/**
 * Cancels every seventh task and deletes another, a moment after its submission (while it is
 * queued, running, or already ended): whichever, it must end as it says.
 */
async function stopSome(app: Target, n: number, id: string, seen: string[]) {
  if (n % 7 < 5) return undefined;
  await new Promise((resolve) => setTimeout(resolve, (n * 37) % 900));
  const cancel = n % 7 === 6;
  const answer = cancel
    ? await call(app, "POST", `/v1/images/tasks/${id}/cancel`)
    : await call(app, "DELETE", `/v1/images/tasks/${id}`);
  seen.push(answer.text);
  expect(answer.status, answer.text).toBe(200);
  if (!cancel) return "deleted";
  return answer.body.error?.code === "cancelled" ? "cancelled" : "ended first";
}

/**
 * Once a task ended, its channels hear nothing more of it (but a cancel of its job): no poll,
 * no next channel. A call sent just before the end may still be on its way (the channel shares
 * this process's event loop, which a loaded machine slows), so counting starts a moment later,
 * once the loop has also read what the channel's sockets hold: a loop stalled past the moment
 * runs the timer first, in the same round as it reads them (seen with six test files at a time
 * on two cores: a call sent before a cancel counted as one after it).
 */
async function expectQuiet(answers: ChaosAnswer[], n: number): Promise<void> {
  const calls = () => answers.filter((a) => a.task === n && a.route !== "cancel").length;
  await new Promise((resolve) => setTimeout(resolve, slow(500)));
  await loopRounds(3);
  const before = calls();
  // Past a poll interval (1 s): a poll still scheduled would have been sent.
  await new Promise((resolve) => setTimeout(resolve, slow(1500)));
  expect(calls(), `calls after the end: ${storyOf(answers, n)}`).toBe(before);
}

/**
 * Resolves once the event loop has gone round `times` times: each round reads what is waiting
 * on its sockets (and runs what that starts) before its `setImmediate` callbacks.
 */
async function loopRounds(times: number): Promise<void> {
  for (let round = 0; round < times; round += 1) {
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Where task `n` goes: submitted to `here`, then watched, stopped and polled on `there`. */
export interface TaskPlaces {
  here: Target;
  there: Target;
  /** Told once it was accepted (a rollout test stops `here` after every submission). */
  onAccepted?: () => void;
}

/**
 * Task `n`, from its submission to its end, checked as a client sees it: it ends (completed with
 * images that are images, or failed), its event stream ends with it, a cancel that won stays won,
 * a task its channels answered well completes, no generation is paid for twice, its channels
 * hear nothing more once it ended, and its webhook comes once, signed.
 */
export async function runChaosTask(
  n: number,
  { here, there, onAccepted }: TaskPlaces,
  channel: { answers: ChaosAnswer[] },
  hooks: { url: string; deliveries: Delivery[] },
  seen: string[],
): Promise<{ n: number; answer: ApiResponse }> {
  const story = (task: number) => storyOf(channel.answers, task);
  const submitted = await submit(here, n, hooks.url);
  seen.push(submitted.text);
  expect(submitted.status, submitted.text).toBe(202);
  onAccepted?.();
  const { id } = submitted.body;
  // Tasks with partial images are watched too: their event stream ends with their end.
  const events = n % 4 === 0 ? await openEvents(there, `/v1/images/tasks/${id}/events`) : undefined;
  const stop = await stopSome(there, n, id, seen);
  if (stop === "deleted") {
    expect((await call(there, "GET", `/v1/images/tasks/${id}`)).status).toBe(404);
    await expectQuiet(channel.answers, n);
    return { n, answer: await call(there, "GET", "/healthz") };
  }
  const answer = await outcome(there, `/v1/images/tasks/${id}`, seen);
  if (events) await expectEventsEnd(events, `image.task.${answer.body.status}`);
  if (answer.body.status === "completed") {
    await expectImages(there, answer);
    expect(answer.body.data!.length, answer.text.slice(0, 400)).toBeLessThanOrEqual(imagesAsked(n));
  }
  // A cancel that said it won stays won: the run's own end came too late to count.
  if (stop === "cancelled") expect(answer.body.error?.code, answer.text).toBe("cancelled");
  // A streamed image completed before anything odd is kept, even if the stream then is not;
  // a task whose channels answered well completed, whatever the others' did.
  const completes = channel.answers.some((a) => a.task === n && a.what.endsWith("(completes)"));
  if (!stop && (completes || isControl(n))) {
    expect(answer.body.status, `${story(n)}; the task: ${answer.text.slice(0, 400)}`).toBe(
      "completed",
    );
  }
  const paid = channel.answers.filter((a) => a.task === n && a.paid && a.whole);
  expect(paid.length, `made twice: ${answer.text.slice(0, 300)}`).toBeLessThanOrEqual(1);
  await expectQuiet(channel.answers, n);
  // Its webhook, once: signed, for its end.
  const mine = () => hooks.deliveries.filter((d) => d.body.includes(`"id":"${id}"`));
  await waitUntil(() => mine().length > 0, `task ${n}'s webhook`);
  expect(mine()).toHaveLength(1);
  expectSignedEvent(mine()[0]!, WEBHOOK_SECRET, id, answer.body.status);
  return { n, answer };
}

/**
 * Background response `n`, from its creation to its end: it ends (completed, incomplete, or
 * failed with a code and a message) in OpenAI's shape, its stream ends with its end (watched
 * after its creation on `there`, or created and watched in one request on `here`), a response
 * its channel answered well completes, and its channel is called once.
 */
export async function runChaosResponse(
  n: number,
  { here, there, onAccepted }: TaskPlaces,
  channel: { answers: ChaosAnswer[] },
  seen: string[],
): Promise<{ n: number; answer: ApiResponse }> {
  const body = { model: "gpt-4o-mini", input: `chaos #${n} a haiku`, background: true };
  let id: string;
  let events: SseStream | undefined;
  if (n % 3 === 1) {
    // Created and watched in one request: the stream's first event names the response.
    events = await openEvents(here, "/v1/responses", { json: { ...body, stream: true } });
    const first = await events.event(0);
    id = String((first.json.response as { id?: string } | undefined)?.id);
    onAccepted?.();
  } else {
    const created = await call(here, "POST", "/v1/responses", { json: body });
    seen.push(created.text);
    expect(created.status, created.text).toBe(200);
    onAccepted?.();
    id = created.body.id;
    if (n % 3 === 0) events = await openEvents(there, `/v1/responses/${id}?stream=true`);
  }
  const answer = await outcome(there, `/v1/responses/${id}`, seen);
  // A response whose channel answered well completed, whatever the others' did.
  if (isControl(n)) {
    const what = `${storyOf(channel.answers, n)}; the response: ${answer.text.slice(0, 400)}`;
    expect(answer.body.status, what).toBe("completed");
  }
  if (events) await expectEventsEnd(events, `response.${answer.body.status}`);
  // A response object of OpenAI's shape, whatever the channel's was.
  const object = answer.body as unknown as { output?: unknown; id: string; status: string };
  expect(object.id, answer.text).toBe(id);
  if (object.status !== "failed") expect(Array.isArray(object.output), answer.text).toBe(true);
  // One channel, so one call: a response is never sent to a channel twice.
  const calls = channel.answers.filter((a) => a.task === n && a.route === "respond");
  expect(calls.length, answer.text.slice(0, 300)).toBeLessThanOrEqual(1);
  return { n, answer };
}
