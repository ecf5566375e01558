import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { TINY_PNG_B64 } from "../../support/fake-answers.js";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";
import { answerWell, isControl } from "./chaos-control.js";
import { readBody, routeOf, taskOf } from "./chaos-routes.js";
import { backgroundEvents, responsesAnswer } from "./chaos-responses.js";
import { chaosBody, DEEP, DEEP_JSON, imageResult, pick, seeded, type Rng } from "./chaos-bodies.js";

/*
 * A channel that answers at random, as a broken gateway, a CDN in front of one or a channel
 * mid-deploy does: any status, bodies that are not what was asked (not JSON, the wrong shape,
 * images that are not images, the channel's key in its messages), answers cut or reset, sent
 * in pieces, never sent. Each answer is drawn from the task's own seeded generator (keyed by
 * the task's number, the route and how many calls of that route it had), so one task's answers
 * do not depend on how the others interleave. Control tasks are answered well (chaos-control.ts).
 */

/** One answer the channel sent, for the test's checks. */
export interface ChaosAnswer {
  task: number;
  route: string;
  what: string;
  /** A generation the channel would bill: a whole image, or a job it accepted. */
  paid: boolean;
  /** The answer left whole (the client could read it all). */
  whole: boolean;
}

export interface ChaosChannel {
  baseUrl: string;
  answers: ChaosAnswer[];
  close(): Promise<void>;
}

type Dialect = "sub2api" | "bifrost" | "openai-background";
type Send = (status: number, body: unknown, headers?: Record<string, string>) => void;

/** Starts the channel on a free port of 127.0.0.1. */
export async function startChaosChannel(seed: number): Promise<ChaosChannel> {
  const answers: ChaosAnswer[] = [];
  const calls = new Map<string, number>();
  // The images each task asked for (`n`), as its submission said: its job's polls say nothing.
  const asked = new Map<number, number>();
  const sockets = new Set<Socket>();
  const nextRng = (task: number, route: string): Rng => {
    const key = `${task}:${route}`;
    const count = (calls.get(key) ?? 0) + 1;
    calls.set(key, count);
    return seeded(seed, key, count);
  };
  let baseUrl = "";

  const server = createServer((req, res) => {
    void readBody(req).then(
      (raw) => {
        const path = new URL(req.url ?? "/", "http://chaos.invalid").pathname;
        const task = taskOf(path, raw);
        const route = routeOf(req.method ?? "GET", path);
        const rng = nextRng(task, route);
        const n = /"n"\s*:\s*(\d+)|name="n"\r\n\r\n(\d+)/.exec(raw.toString("latin1"));
        if (n) asked.set(task, Number(n[1] ?? n[2]));
        const record = (what: string, paid = false): ChaosAnswer => {
          const answer = { task, route, what, paid, whole: false };
          answers.push(answer);
          res.once("finish", () => (answer.whole = true));
          return answer;
        };
        const x = { rng, raw, route, path, task, asked: asked.get(task) ?? 1, req, res, baseUrl };
        answer({ ...x, record });
      },
      () => res.destroy(),
    );
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    baseUrl,
    answers,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

interface Exchange {
  rng: Rng;
  raw: Buffer;
  route: string;
  path: string;
  task: number;
  /** The images the task asked for. */
  asked: number;
  req: IncomingMessage;
  res: ServerResponse;
  baseUrl: string;
  record(what: string, paid?: boolean): ChaosAnswer;
  /** Set by `transport` when the answer, sent whole, is never ended (held open after it). */
  held?: boolean;
}

function answer(x: Exchange): void {
  if (isControl(x.task)) return answerWell(x);
  const send = transport(x);
  if (!send) return;
  const { route } = x;
  if (route === "generate" || route === "edit") return generation(x, send);
  if (route.startsWith("submit:")) return submission(x, route.slice(7) as Dialect, send);
  if (route.startsWith("poll:")) return poll(x, route.slice(5) as Dialect, send);
  if (route === "cancel")
    return send(pick(x.rng, [200, 404, 500]), { id: "x", status: "cancelled" });
  if (route === "image") return imageFile(x);
  if (route === "respond") return respond(x, send);
  x.record("unknown route");
  send(404, { error: { message: "no such route", type: "invalid_request_error" } });
}

/** What goes wrong on the wire, drawn first: or a `send` that answers whole, or in pieces. */
function transport(x: Exchange): Send | undefined {
  const { rng, res, record } = x;
  const fault = rng();
  if (fault < 0.04) {
    record("reset before the answer");
    res.socket?.destroy();
    return undefined;
  }
  if (fault < 0.06) {
    // Never answered: only the task's timeout ends the call.
    record("no answer");
    return undefined;
  }
  if (fault < 0.09) {
    record("bad chunked framing");
    res.socket?.end("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nnot a chunk");
    return undefined;
  }
  if (fault < 0.12) {
    record("html error page");
    res.writeHead(pick(rng, [200, 502, 504]), { "content-type": "text/html" });
    res.end("<html><body><h1>502 Bad Gateway</h1>cloudflare</body></html>");
    return undefined;
  }
  // A cut of an empty body would be a whole answer, its connection free for another call.
  const cut = fault < 0.17;
  const pieces = fault >= 0.17 && fault < 0.22;
  const gzip = fault >= 0.22 && fault < 0.24;
  // Sent whole, chunked, then never ended: a proxy that holds the answer open after it.
  x.held = fault >= 0.24 && fault < 0.28;
  return (status, body, headers = {}) => {
    const text = (typeof body === "string" ? body : JSON.stringify(body)).replace(
      `"${DEEP}"`,
      DEEP_JSON,
    );
    const bytes = Buffer.from(text);
    if (x.held) {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.write(bytes);
      return;
    }
    res.writeHead(status, {
      "content-type": headers["content-type"] ?? "application/json",
      "content-length": String(bytes.length),
      ...(gzip ? { "content-encoding": "gzip" } : {}),
      ...headers,
    });
    if (cut && bytes.length > 0) {
      res.write(bytes.subarray(0, Math.floor(bytes.length / 2)));
      setTimeout(() => res.socket?.destroy(), 20);
    } else if (pieces) {
      void sendInPieces(res, bytes);
    } else {
      res.end(bytes);
    }
  };
}

async function sendInPieces(res: ServerResponse, bytes: Buffer, end = true): Promise<void> {
  const size = Math.max(1, Math.ceil(bytes.length / 4));
  for (let at = 0; at < bytes.length; at += size) {
    if (res.destroyed) return;
    res.write(bytes.subarray(at, at + size));
    await new Promise((resolve) => setTimeout(resolve, 40));
  }
  if (end) res.end();
}

/** A held call: `/images/generations` or `/images/edits`, streamed when it asks. */
function generation(x: Exchange, send: Send): void {
  const { rng } = x;
  const streamed = /"stream"\s*:\s*true/.test(x.raw.toString("latin1"));
  const roll = rng();
  if (roll < 0.3) {
    const status = pick(rng, [400, 401, 403, 404, 408, 413, 429, 500, 502, 503, 504, 520]);
    x.record(`status ${status}`);
    send(status, chaosBody(rng, "error"), retryAfter(rng));
    return;
  }
  if (streamed && roll < 0.8) return streamedGeneration(x);
  const result = imageResult(rng, `${x.baseUrl}/img/${x.task}`, x.asked);
  // A good image held open more often than other answers: the task completes with it.
  if (result.completes && rng() < 0.4) x.held = true;
  const held = x.held ? `, held open${result.completes ? " (completes)" : ""}` : "";
  x.record(`200 ${result.what}${held}`, result.valid);
  send(200, result.body);
}

/** A `stream: true` answer: events as gpt-image sends them, and as it never should. */
function streamedGeneration(x: Exchange): void {
  const { rng, res } = x;
  const events: string[] = [];
  const count = 1 + Math.floor(rng() * 4);
  let valid = false;
  // Its image came before anything odd: the task completes with it, whatever follows.
  let completesFirst = false;
  let odd = false;
  for (let i = 0; i < count; i++) {
    const kind = pick(rng, [
      ...["partial", "partial", "completed", "garbage", "error", "done", "odd"],
      "completed, not an image",
    ]);
    // Lines that are not JSON are skipped; an error or an odd object may end the stream, and a
    // [DONE] ends it (what follows is not read, as the openai SDK does not). A completed image
    // that is none is dropped, but counts as the one image asked for: reading stops there too.
    if (!["partial", "completed", "garbage"].includes(kind)) odd = true;
    if (kind === "partial") {
      events.push(event({ type: "image_generation.partial_image", b64_json: TINY_PNG_B64 }));
    } else if (kind === "completed") {
      valid = true;
      // Of two asked for, one then a stream held open without its [DONE] fails (`timeout`).
      completesFirst ||= !odd && x.asked === 1;
      events.push(event({ type: "image_generation.completed", b64_json: TINY_PNG_B64 }));
    } else if (kind === "completed, not an image") {
      // Made and billed all the same: a generation paid for, never to be made again.
      valid = true;
      const notAnImage = Buffer.from("GIF89a not one of ours").toString("base64");
      events.push(event({ type: "image_generation.completed", b64_json: notAnImage }));
    } else if (kind === "garbage") {
      events.push("data: {not json\n\n");
    } else if (kind === "error") {
      events.push(
        event({ type: "error", error: { code: "boom", message: `key ${UPSTREAM_KEY}` } }),
      );
    } else if (kind === "done") {
      events.push("data: [DONE]\n\n");
    } else {
      events.push(event(chaosBody(rng, "event")));
    }
  }
  const after = pick(rng, ["end", "end", "end", "cut", "held open"]);
  const completes = completesFirst ? " (completes)" : "";
  x.record(`stream of ${count} events, then ${after}${completes}`, valid);
  res.writeHead(200, { "content-type": "text/event-stream" });
  // A cut comes before the stream's end: a response ended whole frees its connection for the
  // next call, which a cut then would reset (a call of another task, sent or not).
  void sendInPieces(res, Buffer.from(events.join("")), after === "end").then(() => {
    if (after === "cut") res.socket?.destroy();
  });
}

function event(data: unknown): string {
  return `data: ${JSON.stringify(data).replace(`"${DEEP}"`, DEEP_JSON)}\n\n`;
}

/** `events` as an event stream, sent in pieces, cut after them now and then. */
function streamEvents(x: Exchange, events: unknown[]): void {
  x.res.writeHead(200, { "content-type": "text/event-stream" });
  const cut = x.rng() < 0.15;
  void sendInPieces(x.res, Buffer.from(events.map(event).join("")), !cut).then(() => {
    if (cut) x.res.socket?.destroy();
  });
}

/** A held Responses call (a background response's run): refused, or answered in any shape. */
function respond(x: Exchange, send: Send): void {
  const { rng } = x;
  if (rng() < 0.2) {
    const status = pick(rng, [400, 401, 429, 500, 502, 503]);
    x.record(`status ${status}`);
    send(status, chaosBody(rng, "error"), retryAfter(rng));
    return;
  }
  const answer = responsesAnswer(rng);
  x.record(answer.what, answer.valid);
  if (answer.kind === "json") return send(200, answer.body);
  streamEvents(x, answer.events);
}

function retryAfter(rng: Rng): Record<string, string> {
  if (rng() < 0.6) return {};
  return {
    "retry-after": pick(rng, [
      "abc",
      "-5",
      "0",
      "1.5",
      "999999",
      "1",
      "Wed, 21 Oct 2015 07:28:00 GMT",
    ]),
  };
}

/** A job's submission: an id (often), or anything else. */
function submission(x: Exchange, dialect: Dialect, send: Send): void {
  const { rng, task } = x;
  const roll = rng();
  if (roll < 0.25) {
    const status = pick(rng, [400, 401, 403, 404, 429, 500, 502, 503]);
    x.record(`submit status ${status}`);
    send(status, chaosBody(rng, "error"), retryAfter(rng));
    return;
  }
  if (roll < 0.4) {
    x.record("submit without a usable id");
    send(pick(rng, [200, 202]), chaosBody(rng, "job"));
    return;
  }
  const id = `${dialect === "openai-background" ? "resp_" : "job_"}${task}_${Math.floor(rng() * 1e9)}`;
  x.record(`submitted ${id}`, true);
  if (dialect === "openai-background" && /"stream"\s*:\s*true/.test(x.raw.toString("latin1"))) {
    if (rng() < 0.6) return streamEvents(x, backgroundEvents(rng, id));
  }
  const status = dialect === "openai-background" ? "queued" : "processing";
  send(dialect === "bifrost" ? 202 : 200, { id, task_id: id, status, object: "response" });
}

/** A poll of a job: still running (under any name), finished in any shape, or an error. */
function poll(x: Exchange, dialect: Dialect, send: Send): void {
  const { rng } = x;
  const roll = rng();
  if (roll < 0.2) {
    const status = pick(rng, [404, 410, 429, 500, 502, 503]);
    x.record(`poll status ${status}`);
    send(status, chaosBody(rng, "error"), retryAfter(rng));
    return;
  }
  const id = x.path.split("/").at(-1) ?? "";
  if (roll < 0.55) {
    const running = pick(rng, ["processing", "queued", "in_progress", "pending", "", 42, null]);
    x.record(`running (${String(running)})`);
    send(200, { id, status: running }, retryAfter(rng));
    return;
  }
  if (roll < 0.7) {
    x.record("job failed");
    const error = chaosBody(rng, "error");
    send(200, { id, status: "failed", ...(error as object), http_status: 400 });
    return;
  }
  if (roll < 0.78) {
    x.record("poll answer of no known shape");
    send(200, chaosBody(rng, "job"));
    return;
  }
  const result = imageResult(rng, `${x.baseUrl}/img/${x.task}`, x.asked);
  x.record(`completed: ${result.what}`);
  if (dialect === "openai-background") {
    const item = rng() < 0.5 ? result.body : backgroundOutput(rng);
    send(200, { id, object: "response", status: "completed", output: item, usage: null });
    return;
  }
  send(200, { id, status: "completed", result: result.body, http_status: 200 });
}

function backgroundOutput(rng: Rng): unknown {
  return pick(rng, [
    [{ type: "image_generation_call", status: "completed", result: TINY_PNG_B64 }],
    [{ type: "image_generation_call", status: "completed", result: "%%%not base64" }],
    [{ type: "image_generation_call", status: "failed" }],
    [{ type: "message", content: [{ type: "output_text", text: "no image for you" }] }],
    [null, 7, "x"],
    "output",
  ]);
}

/** An image a `url` answer points at: the image, or anything else. */
function imageFile(x: Exchange): void {
  const { rng, res } = x;
  const kind = pick(rng, ["png", "png", "not found", "text", "slow", "held open"]);
  // Held open after its last byte (a CDN that never sends the last chunk): the task completes.
  x.record(`image: ${kind}${kind === "held open" ? " (completes)" : ""}`);
  if (kind === "not found") {
    res.writeHead(404, { "content-type": "text/plain" }).end("gone");
  } else if (kind === "text") {
    res.writeHead(200, { "content-type": "image/png" }).end("this is not a png");
  } else {
    const png = Buffer.from(TINY_PNG_B64, "base64");
    if (kind === "png") res.writeHead(200, { "content-type": "image/png" }).end(png);
    else if (kind === "held open") res.writeHead(200, { "content-type": "image/png" }).write(png);
    else void sendInPieces(res.writeHead(200, { "content-type": "image/png" }), png);
  }
}
