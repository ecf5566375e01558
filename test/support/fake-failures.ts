import type { IncomingMessage, ServerResponse } from "node:http";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { drainedOrClosed } from "./drained-or-closed.js";
import { FAKE_SPEECH } from "./fake-answers.js";
import { errorEnvelope, now, pause, sendJson } from "./fake-http.js";
import type { Behavior, FakeRoute } from "./fake-upstream-types.js";

/** The behaviours of a channel that fails: everything but answering, hanging and custom. */
export type FailureBehavior = Exclude<
  Behavior,
  { kind: "ok" } | { kind: "hang" } | { kind: "custom" } | { kind: "reset-early" }
>;

/** The spellings a JSON encoder or an echo may give a key. */
export function keySpellings(key: string): string[] {
  const escape = (char: string, upper: boolean) => {
    const hex = char.charCodeAt(0).toString(16).padStart(4, "0");
    return `\\u${upper ? hex.toUpperCase() : hex}`;
  };
  return [
    key,
    key.replaceAll("/", "\\/"),
    [...key].map((char) => escape(char, false)).join(""),
    [...key].map((char) => escape(char, true)).join(""),
    [...key].map((char, i) => (i % 2 === 0 ? escape(char, i % 4 === 0) : char)).join(""),
  ];
}

/** A half-sent answer for the failure behaviours, in the route's own content type. */
function halfAnswer(route: FakeRoute, stream: boolean) {
  if (route === "speech") return { type: "audio/mpeg", body: FAKE_SPEECH };
  if (stream) {
    const event = `data: ${JSON.stringify({ id: "half", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: "y".repeat(100) }, finish_reason: null }] })}\n\n`;
    return { type: "text/event-stream", body: Buffer.from(event.repeat(40)) };
  }
  return {
    type: "application/json",
    body: Buffer.from(JSON.stringify({ id: "half", object: "x", data: "y".repeat(4000) })),
  };
}

/**
 * Answers one request as `behavior` says. Resolves `"destroyed"` when it
 * destroyed the socket itself (so the request does not count as aborted by
 * its client).
 */
export async function answerFailure(
  behavior: FailureBehavior,
  route: FakeRoute,
  req: IncomingMessage,
  res: ServerResponse,
  fields: Record<string, unknown>,
): Promise<"destroyed" | undefined> {
  switch (behavior.kind) {
    case "reset":
      req.socket.destroy();
      return "destroyed";
    case "garbage": {
      const payload = "<html>this is not JSON";
      res.writeHead(200, {
        "content-type": "application/json",
        "content-length": payload.length,
      });
      res.end(payload);
      return;
    }
    case "cut": {
      const half = halfAnswer(route, fields.stream === true);
      res.writeHead(200, { "content-type": half.type, "content-length": half.body.length });
      res.write(half.body.subarray(0, half.body.length >> 1));
      await pause(res, 20);
      req.socket.destroy();
      return "destroyed";
    }
    case "truncated": {
      const half = halfAnswer(route, fields.stream === true);
      res.writeHead(200, { "content-type": half.type });
      res.end(half.body.subarray(0, half.body.length >> 1));
      return;
    }
    case "stall":
      if (fields.stream === true) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(
          `data: ${JSON.stringify({ id: "stalled", object: "chat.completion.chunk", created: now(), model: fields.model, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] })}\n\n`,
        );
      } else {
        res.writeHead(200, { "content-type": halfAnswer(route, fields.stream === true).type });
        res.flushHeaders();
      }
      return;
    case "large":
      await answerLarge(res, behavior.bytes, fields.stream === true);
      return;
    case "redirect":
      res.writeHead(behavior.status ?? 307, { location: behavior.location });
      res.end();
      return;
    case "echo-key":
      await answerEcho(res, req, fields, behavior);
      return;
    case "status":
      sendJson(
        res,
        behavior.status,
        behavior.body ??
          errorEnvelope(
            `fake upstream answered ${behavior.status}`,
            behavior.status >= 500 ? "server_error" : "invalid_request_error",
            behavior.status >= 500 ? "upstream_error" : "bad_request",
          ),
      );
      return;
  }
}

/**
 * A valid answer of about `bytes`, without a Content-Length (so only counting
 * what arrives can cap it): JSON, or an event stream when one was asked for.
 */
async function answerLarge(res: ServerResponse, bytes: number, stream: boolean): Promise<void> {
  const piece = "y".repeat(16 * 1024);
  res.writeHead(200, { "content-type": stream ? "text/event-stream" : "application/json" });
  if (!stream) res.write('{"id":"large","object":"x","data":"');
  for (let sent = 0; sent < bytes; sent += piece.length) {
    const ok = res.write(stream ? `data: {"piece":"${piece}"}\n\n` : piece);
    if (!ok && !(await drainedOrClosed(res))) return;
  }
  res.end(stream ? "data: [DONE]\n\n" : '"}');
}

async function answerEcho(
  res: ServerResponse,
  req: IncomingMessage,
  body: Record<string, unknown>,
  behavior: Extract<Behavior, { kind: "echo-key" }>,
): Promise<void> {
  const key = String(req.headers.authorization ?? "").replace(/^Bearer /, "");
  const spellings = keySpellings(key);
  const status = behavior.status ?? 200;
  const headers: Record<string, string> = {
    "x-request-id": `req_${key}`,
    "x-ratelimit-remaining-requests": spellings[2] as string,
    "x-echo-authorization": `Bearer ${key}`,
    "openai-organization": `org-${key}`,
    "set-cookie": `session=${key}`,
  };
  if (status === 200 && body.stream === true) {
    res.writeHead(200, { ...headers, "content-type": "text/event-stream" });
    for (const spelling of spellings) {
      // The key split across two writes: a scrubber must see it whole.
      const event = `data: {"echo":"${spelling}"}\n\n`;
      const cut = event.indexOf(spelling) + Math.floor(spelling.length / 2);
      res.write(event.slice(0, cut));
      if (!(await pause(res, 10))) return;
      res.write(event.slice(cut));
      if (!(await pause(res, 10))) return;
    }
    res.end("data: [DONE]\n\n");
    return;
  }
  const json =
    status === 200
      ? `{"id":"echo","object":"chat.completion","model":"echo","echo":[${spellings
          .map((s) => `"${s}"`)
          .join(",")}],"choices":[]}`
      : `{"error":{"message":"bad key ${spellings.join(" ")}","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`;
  let payload: Buffer = Buffer.from(json);
  if (behavior.encoding === "gzip") payload = gzipSync(payload);
  if (behavior.encoding === "br") payload = brotliCompressSync(payload);
  if (behavior.encoding === "deflate") payload = deflateSync(payload);
  res.writeHead(status, {
    ...headers,
    "content-type": "application/json",
    "content-length": payload.length,
    ...(behavior.encoding ? { "content-encoding": behavior.encoding } : {}),
  });
  res.end(payload);
}
