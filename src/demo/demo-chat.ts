import { demoChatReply, demoId, estimateTokens, messageText } from "./demo-chat-reply.js";
import { openEventStream, streamPieces } from "./demo-event-stream.js";
import {
  clientGoneSignal,
  DemoRequestError,
  invalidParam,
  isJsonObject,
  missingParam,
  readObjectBody,
  sendJson,
} from "./demo-http-helpers.js";
import type { DemoHandler } from "./demo-route.js";
import { structuredReply } from "./demo-structured-reply.js";

/** `POST /v1/chat/completions`: quotes the last user message back, plain or streamed word by word. */
export const handleChat: DemoHandler = async (req, res, context) => {
  const gone = clientGoneSignal(res);
  const { value: body } = await readObjectBody(req);
  const { model, messages } = body;
  if (typeof model !== "string" || model.length === 0) {
    throw new DemoRequestError(400, missingParam("model"));
  }
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new DemoRequestError(
      400,
      messages === undefined
        ? missingParam("messages")
        : invalidParam("messages", "'messages' must be a non-empty array."),
    );
  }

  const echo = demoChatReply(messages);
  const reply = structuredReply(body.response_format, echo) ?? echo;
  const promptText = messages
    .map((m: unknown) => (isJsonObject(m) ? messageText(m.content) : ""))
    .join("\n");
  const usage = {
    prompt_tokens: estimateTokens(promptText),
    completion_tokens: estimateTokens(reply),
    total_tokens: estimateTokens(promptText) + estimateTokens(reply),
  };
  const id = demoId("chatcmpl-demo");
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

  const stream = openEventStream(res, context.streamDelayMs, gone);
  const send = (choices: unknown[], extra: Record<string, unknown> = {}): void => {
    stream.send({
      id,
      object: "chat.completion.chunk",
      created,
      model,
      system_fingerprint: "demo",
      choices,
      ...extra,
    });
  };
  const delta = (d: Record<string, unknown>, finish: string | null = null): unknown => ({
    index: 0,
    delta: d,
    logprobs: null,
    finish_reason: finish,
  });

  send([delta({ role: "assistant", content: "", refusal: null })]);
  for (const word of streamPieces(reply)) {
    if (!(await stream.pause())) return; // the client went away; nothing left to send to
    send([delta({ content: word })]);
  }
  send([delta({}, "stop")]);
  const streamOptions = body.stream_options;
  if (isJsonObject(streamOptions) && streamOptions.include_usage === true) {
    send([], { usage });
  }
  stream.end({ done: true });
};
