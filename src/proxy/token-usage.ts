/** Tokens an answer reports, in the two spellings OpenAI's APIs use. */
export interface TokenUsage {
  input: number;
  output: number;
  /** The model that answered, when the answer names it. */
  model?: string;
}

const count = (value: unknown): number =>
  typeof value === "number" && Number.isFinite(value) && value > 0 ? value : 0;

/**
 * The token usage of an OpenAI answer or stream event: `usage` of chat,
 * completions, embeddings and images (`prompt_tokens`/`completion_tokens` or
 * `input_tokens`/`output_tokens`), or `response.usage` of a Responses API
 * event. `undefined` when there is none (or it counts seconds, as audio may).
 */
export function usageOf(answer: unknown): TokenUsage | undefined {
  if (!answer || typeof answer !== "object") return undefined;
  const record = answer as {
    usage?: unknown;
    model?: unknown;
    response?: { usage?: unknown; model?: unknown } | null;
  };
  const usage = (record.usage ?? record.response?.usage) as Record<string, unknown> | null;
  if (!usage || typeof usage !== "object") return undefined;
  const input = count(usage.prompt_tokens ?? usage.input_tokens);
  const output = count(usage.completion_tokens ?? usage.output_tokens);
  if (input === 0 && output === 0) return undefined;
  const model = record.model ?? record.response?.model;
  return typeof model === "string" ? { input, output, model } : { input, output };
}
