import { demoId, estimateTokens, quote } from "./demo-chat-reply.js";
import { openEventStream, streamPieces } from "./demo-event-stream.js";
import {
  clientGoneSignal,
  DemoRequestError,
  invalidParam,
  isJsonObject,
  missingParam,
  readObjectBody,
  sendJson,
  wholeNumber,
} from "./demo-http-helpers.js";
import type { DemoHandler } from "./demo-route.js";

/** One text a completion is asked for, and what the demo answers. */
interface Choice {
  index: number;
  text: string;
  finishReason: "stop" | "length";
}

/**
 * `POST /v1/completions` (legacy, `gpt-3.5-turbo-instruct`): each prompt gets a completion that
 * quotes it, cut to `max_tokens` (finish reason `length`) when that is given; `echo` puts the
 * prompt first, `n` answers each prompt that many times. Plain, or streamed word by word.
 */
export const handleCompletions: DemoHandler = async (req, res, context) => {
  const gone = clientGoneSignal(res);
  const { value: body } = await readObjectBody(req);
  if (typeof body.model !== "string" || body.model.length === 0) {
    throw new DemoRequestError(400, missingParam("model"));
  }
  const model = body.model;
  const prompts = parsePrompts(body.prompt);
  const n = wholeNumber(body.n, "n", 1, 128, 1);
  const maxTokens = wholeNumber(body.max_tokens, "max_tokens", 1, 1_000_000, Infinity);

  const choices: Choice[] = [];
  let promptTokens = 0;
  let completionTokens = 0;
  for (const prompt of prompts) {
    promptTokens += estimateTokens(prompt);
    const { text, cut } = limitTokens(demoCompletion(prompt), maxTokens);
    for (let i = 0; i < n; i++) {
      completionTokens += estimateTokens(text);
      choices.push({
        index: choices.length,
        text: body.echo === true ? `${prompt}${text}` : text,
        finishReason: cut ? "length" : "stop",
      });
    }
  }
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
  const id = demoId("cmpl-demo");
  const created = Math.floor(Date.now() / 1000);
  const chunk = (choiceList: unknown[], extra: Record<string, unknown> = {}) => ({
    id,
    object: "text_completion",
    created,
    model,
    system_fingerprint: "demo",
    choices: choiceList,
    ...extra,
  });
  const choice = (index: number, text: string, finishReason: string | null) => ({
    text,
    index,
    logprobs: null,
    finish_reason: finishReason,
  });

  if (body.stream !== true) {
    sendJson(
      res,
      200,
      chunk(
        choices.map((c) => choice(c.index, c.text, c.finishReason)),
        { usage },
      ),
    );
    return;
  }
  const stream = openEventStream(res, context.streamDelayMs, gone);
  for (const c of choices) {
    for (const piece of streamPieces(c.text)) {
      if (!(await stream.pause())) return;
      stream.send(chunk([choice(c.index, piece, null)]));
    }
    stream.send(chunk([choice(c.index, "", c.finishReason)]));
  }
  const streamOptions = body.stream_options;
  if (isJsonObject(streamOptions) && streamOptions.include_usage === true) {
    stream.send(chunk([], { usage }));
  }
  stream.end({ done: true });
};

/** The made-up continuation of a prompt. */
function demoCompletion(prompt: string): string {
  const quoted = quote(prompt);
  return quoted.length === 0
    ? " Demo completion: send a prompt and the demo channel will echo it back."
    : ` Demo completion of: ${quoted}`;
}

/** Cuts text to about `maxTokens` tokens at a word boundary, as `max_tokens` would. */
function limitTokens(text: string, maxTokens: number): { text: string; cut: boolean } {
  if (estimateTokens(text) <= maxTokens) return { text, cut: false };
  let kept = "";
  for (const piece of streamPieces(text)) {
    if (estimateTokens(kept + piece) > maxTokens) break;
    kept += piece;
  }
  return { text: kept || text.slice(0, maxTokens * 4), cut: true };
}

/** `prompt` as OpenAI takes it: a text, a list of texts, or token ids (answered as their count). */
function parsePrompts(prompt: unknown): string[] {
  if (prompt === undefined || prompt === null) {
    throw new DemoRequestError(400, missingParam("prompt"));
  }
  if (typeof prompt === "string") return [prompt];
  const tokens = (list: unknown[]) => `(${list.length} token ids)`;
  if (Array.isArray(prompt) && prompt.length > 0) {
    if (prompt.every((p) => typeof p === "number")) return [tokens(prompt)];
    if (prompt.every((p) => typeof p === "string" || Array.isArray(p))) {
      return prompt.map((p: unknown) => (typeof p === "string" ? p : tokens(p as unknown[])));
    }
  }
  throw new DemoRequestError(
    400,
    invalidParam("prompt", "'prompt' must be a string, a list of strings, or token ids."),
  );
}
