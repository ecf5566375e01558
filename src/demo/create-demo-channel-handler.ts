import { randomBytes } from "node:crypto";
import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { setImmediate as nextTurn, setTimeout as sleep } from "node:timers/promises";
import { demoChatReply, estimateTokens, messageText } from "./demo-chat-reply.js";
import {
  isJsonObject,
  readJsonBody,
  sendJson,
  sendOpenAiError,
  type OpenAiErrorBody,
} from "./demo-http-helpers.js";
import { DEMO_MODELS } from "./demo-models.js";
import { drawDemoImage, parseDemoImageSize } from "./draw-demo-image.js";
import { encodePng } from "./png-encoder.js";

/** What the demo channel's request handler needs. */
export interface DemoChannelHandlerOptions {
  /** How long an image generation takes, to imitate a slow image model. */
  imageDelayMs: number;
  /** Pause between streamed words, so streaming is visible in a terminal. Default 20 ms. */
  streamChunkDelayMs?: number;
}

/** Requests over this size are refused; prompts are at most 32000 characters anyway. */
const BODY_LIMIT_BYTES = 10 * 1024 * 1024;
/** A prompt starting with this fails like a moderation refusal, to show a failed task. */
export const DEMO_FAIL_PREFIX = "!fail";
/** Fixed so `/v1/models` answers the same on every start. */
const MODELS_CREATED = 1_700_000_000;

/**
 * Builds the demo channel: a small OpenAI-compatible API answered in-process, so the service's
 * proxy can talk to it exactly like to a real gateway and a fresh install works with no account.
 *
 * Any model id is accepted on chat and images (the service decides which models reach a channel);
 * `/v1/models` lists {@link DEMO_MODELS}.
 */
export function createDemoChannelHandler(options: DemoChannelHandlerOptions): RequestListener {
  const streamDelayMs = options.streamChunkDelayMs ?? 20;

  const route = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const method = req.method ?? "GET";
    const path = new URL(req.url ?? "/", "http://demo.invalid").pathname.replace(/\/+$/, "");

    if (method === "GET" && path === "/v1/models") {
      sendJson(res, 200, { object: "list", data: DEMO_MODELS.map(modelObject) });
      return;
    }
    const modelMatch = /^\/v1\/models\/([^/]+)$/.exec(path);
    if (method === "GET" && modelMatch) {
      const id = decodeURIComponent(modelMatch[1]!);
      if (DEMO_MODELS.includes(id)) {
        sendJson(res, 200, modelObject(id));
      } else {
        sendOpenAiError(res, 404, {
          message: `The model '${id}' does not exist on the demo channel.`,
          code: "model_not_found",
        });
      }
      return;
    }
    if (method === "POST" && path === "/v1/chat/completions") {
      await handleChat(req, res, streamDelayMs);
      return;
    }
    if (method === "POST" && path === "/v1/images/generations") {
      await handleImages(req, res, options.imageDelayMs);
      return;
    }
    // Drain the body so the connection stays usable for keep-alive.
    req.resume();
    sendOpenAiError(res, 404, {
      message: `Unknown route: ${method} ${path || "/"}`,
      code: "not_found",
    });
  };

  return (req, res) => {
    route(req, res).catch((error: unknown) => {
      if (!res.headersSent) {
        sendOpenAiError(res, 500, {
          message: `The demo channel failed: ${error instanceof Error ? error.message : String(error)}`,
          code: "internal_error",
        });
      } else {
        res.destroy();
      }
    });
  };
}

function modelObject(id: string): Record<string, unknown> {
  return { id, object: "model", created: MODELS_CREATED, owned_by: "demo" };
}

/** Aborts when the client goes away before the response is complete. */
function clientGoneSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

async function readObjectBody(
  req: IncomingMessage,
  res: ServerResponse,
): Promise<Record<string, unknown> | undefined> {
  const body = await readJsonBody(req, BODY_LIMIT_BYTES);
  if (!body.ok) {
    sendOpenAiError(res, body.status, body.error);
    return undefined;
  }
  if (!isJsonObject(body.value)) {
    sendOpenAiError(res, 400, {
      message: "The request body must be a JSON object.",
      code: "invalid_value",
    });
    return undefined;
  }
  return body.value;
}

function missing(param: string): OpenAiErrorBody {
  return {
    message: `Missing required parameter: '${param}'.`,
    type: "invalid_request_error",
    param,
    code: "missing_required_parameter",
  };
}

function invalid(param: string, message: string): OpenAiErrorBody {
  return { message, type: "invalid_request_error", param, code: "invalid_value" };
}

async function handleChat(
  req: IncomingMessage,
  res: ServerResponse,
  streamDelayMs: number,
): Promise<void> {
  const gone = clientGoneSignal(res);
  const body = await readObjectBody(req, res);
  if (!body) return;
  const { model, messages } = body;
  if (typeof model !== "string" || model.length === 0) {
    sendOpenAiError(res, 400, missing("model"));
    return;
  }
  if (!Array.isArray(messages) || messages.length === 0) {
    sendOpenAiError(
      res,
      400,
      messages === undefined
        ? missing("messages")
        : invalid("messages", "'messages' must be a non-empty array."),
    );
    return;
  }

  const reply = demoChatReply(messages);
  const promptText = messages
    .map((m: unknown) => (isJsonObject(m) ? messageText(m.content) : ""))
    .join("\n");
  const usage = {
    prompt_tokens: estimateTokens(promptText),
    completion_tokens: estimateTokens(reply),
    total_tokens: estimateTokens(promptText) + estimateTokens(reply),
  };
  const id = `chatcmpl-demo${randomBytes(12).toString("hex")}`;
  const created = Math.floor(Date.now() / 1000);

  if (body.stream !== true) {
    sendJson(res, 200, {
      id,
      object: "chat.completion",
      created,
      model,
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: reply, refusal: null },
          logprobs: null,
          finish_reason: "stop",
        },
      ],
      usage,
      system_fingerprint: "demo",
    });
    return;
  }

  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  const send = (choices: unknown[], extra: Record<string, unknown> = {}): void => {
    const chunk = {
      id,
      object: "chat.completion.chunk",
      created,
      model,
      system_fingerprint: "demo",
      choices,
      ...extra,
    };
    res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  };
  const delta = (d: Record<string, unknown>, finish: string | null = null): unknown => ({
    index: 0,
    delta: d,
    logprobs: null,
    finish_reason: finish,
  });

  send([delta({ role: "assistant", content: "", refusal: null })]);
  // Words keep their trailing space, so the chunks concatenate back to the exact reply.
  for (const word of reply.split(/(?<= )/)) {
    try {
      await sleep(streamDelayMs, undefined, { signal: gone });
    } catch {
      return; // the client went away; nothing left to send to
    }
    send([delta({ content: word })]);
  }
  send([delta({}, "stop")]);
  const streamOptions = body.stream_options;
  if (isJsonObject(streamOptions) && streamOptions.include_usage === true) {
    send([], { usage });
  }
  res.end("data: [DONE]\n\n");
}

async function handleImages(
  req: IncomingMessage,
  res: ServerResponse,
  imageDelayMs: number,
): Promise<void> {
  const gone = clientGoneSignal(res);
  const body = await readObjectBody(req, res);
  if (!body) return;
  const { model, prompt } = body;
  if (typeof prompt !== "string" || prompt.length === 0) {
    sendOpenAiError(res, 400, missing("prompt"));
    return;
  }
  const n = body.n ?? 1;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 10) {
    sendOpenAiError(res, 400, invalid("n", "'n' must be an integer from 1 to 10."));
    return;
  }
  const size = parseDemoImageSize(body.size);
  if (!size) {
    sendOpenAiError(res, 400, invalid("size", "'size' must be 'auto' or 'WIDTHxHEIGHT'."));
    return;
  }

  // Imitates a slow image model; a client that gives up stops the wait.
  try {
    await sleep(imageDelayMs, undefined, { signal: gone });
  } catch {
    return;
  }

  // Checked after the delay, like a real moderation refusal, so a demo task visibly runs first.
  if (prompt.trimStart().startsWith(DEMO_FAIL_PREFIX)) {
    sendOpenAiError(res, 400, {
      message:
        "Your request was rejected by the demo channel's safety system (the prompt starts with '!fail').",
      type: "invalid_request_error",
      code: "content_policy_violation",
    });
    return;
  }

  // Always PNG and always base64, like gpt-image-1: a requested `output_format` of jpeg/webp or
  // `response_format: "url"` still gets PNG bytes in `b64_json`; the service stores and serves
  // image URLs itself.
  const data: Array<Record<string, unknown>> = [];
  for (let i = 0; i < n; i++) {
    if (gone.aborted) return;
    const png = encodePng(drawDemoImage(prompt, size, i));
    const item: Record<string, unknown> = { b64_json: png.toString("base64") };
    if (typeof model === "string" && model.startsWith("dall-e")) item.revised_prompt = prompt;
    data.push(item);
    // Big pictures take tens of milliseconds each; let other requests in between them.
    await nextTurn();
  }
  if (gone.aborted) return;

  const inputTokens = estimateTokens(prompt);
  const outputTokens = n * Math.ceil((size.width * size.height) / 1000);
  sendJson(res, 200, {
    created: Math.floor(Date.now() / 1000),
    data,
    output_format: "png",
    size: `${size.width}x${size.height}`,
    usage: {
      input_tokens: inputTokens,
      input_tokens_details: { text_tokens: inputTokens, image_tokens: 0 },
      output_tokens: outputTokens,
      total_tokens: inputTokens + outputTokens,
    },
  });
}
