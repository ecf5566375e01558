/** An image call's token usage, as `task.completed`, the spans and the token metrics read it. */
export interface ImageUsage {
  input: number;
  output: number;
  /** Of the input, the tokens of input images (an edit's), where the channel gave them. */
  image?: number;
}

const count = (value: unknown) =>
  typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : undefined;

/**
 * The token counts of an image answer's `usage` (gpt-image: `input_tokens`,
 * `output_tokens`, `input_tokens_details.image_tokens`); undefined when it
 * has none. Read as a synchronous image call's usage is read.
 */
export function imageUsageOf(usage: unknown): ImageUsage | undefined {
  if (!usage || typeof usage !== "object") return undefined;
  const u = usage as Record<string, unknown>;
  const input = count(u.input_tokens ?? u.prompt_tokens);
  const output = count(u.output_tokens ?? u.completion_tokens);
  if (input === undefined && output === undefined) return undefined;
  const details = u.input_tokens_details as Record<string, unknown> | undefined;
  const image = count(details?.image_tokens);
  return { input: input ?? 0, output: output ?? 0, ...(image === undefined ? {} : { image }) };
}
