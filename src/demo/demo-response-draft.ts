import { demoId, estimateTokens, messageText } from "./demo-chat-reply.js";

type Json = Record<string, unknown>;

/**
 * A response being made: its ids, reply text and usage, and the Response
 * object at each step (`snapshot`), with its message and text parts as
 * OpenAI shapes them.
 */
export class ResponseDraft {
  readonly id = demoId("resp_");
  readonly messageId = demoId("msg_");
  readonly createdAt = Math.floor(Date.now() / 1000);
  readonly usage: Json;

  constructor(
    private readonly body: Json,
    /** The request's input items, as stored. */
    readonly items: Json[],
    /** The reply. */
    readonly text: string,
  ) {
    const inputText = [body.instructions, ...items.map((item) => messageText(item.content))]
      .filter((t): t is string => typeof t === "string")
      .join("\n");
    this.usage = {
      input_tokens: estimateTokens(inputText),
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: estimateTokens(text),
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: estimateTokens(inputText) + estimateTokens(text),
    };
  }

  /** An `output_text` content part. */
  part(text: string): Json {
    return { type: "output_text", annotations: [], logprobs: [], text };
  }

  /** The assistant's message item. */
  message(status: string, content: unknown[]): Json {
    return { id: this.messageId, type: "message", status, content, role: "assistant" };
  }

  /** The Response object as it is at `status`; `done`: with its output and usage. */
  snapshot(status: string, done: boolean): Json {
    return responseObject(this.body, {
      id: this.id,
      createdAt: this.createdAt,
      status,
      completedAt: done ? Math.floor(Date.now() / 1000) : null,
      output: done ? [this.message("completed", [this.part(this.text)])] : [],
      usage: done ? this.usage : null,
    });
  }
}

/** The parts of a response that change as it runs. */
interface ResponseState {
  id: string;
  createdAt: number;
  status: string;
  completedAt: number | null;
  output: unknown[];
  usage: unknown;
}

/** A full Response object: the request's settings echoed, with OpenAI's defaults. */
function responseObject(body: Json, state: ResponseState): Json {
  const given = (key: string, fallback: unknown) => body[key] ?? fallback;
  return {
    id: state.id,
    object: "response",
    created_at: state.createdAt,
    status: state.status,
    background: body.background === true,
    completed_at: state.completedAt,
    error: null,
    incomplete_details: null,
    instructions: given("instructions", null),
    max_output_tokens: given("max_output_tokens", null),
    max_tool_calls: given("max_tool_calls", null),
    model: body.model,
    output: state.output,
    parallel_tool_calls: given("parallel_tool_calls", true),
    previous_response_id: given("previous_response_id", null),
    prompt_cache_key: given("prompt_cache_key", null),
    reasoning: given("reasoning", { effort: null, summary: null }),
    safety_identifier: given("safety_identifier", null),
    service_tier: given("service_tier", "default"),
    store: body.store !== false,
    temperature: given("temperature", 1),
    text: given("text", { format: { type: "text" }, verbosity: "medium" }),
    tool_choice: given("tool_choice", "auto"),
    tools: given("tools", []),
    top_logprobs: given("top_logprobs", 0),
    top_p: given("top_p", 1),
    truncation: given("truncation", "disabled"),
    usage: state.usage,
    user: given("user", null),
    metadata: given("metadata", {}),
  };
}
