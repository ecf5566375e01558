/** What stands in a log line where a channel's message repeated the prompt. */
export const PROMPT_MASK = "[prompt]";

/** Shorter prompts are not searched for: "a cat" would mask every "a cat" a message says. */
const MIN_PROMPT_LENGTH = 4;

/**
 * Shortest start of a prompt masked when a message repeats only its start (a
 * channel that cut a long prompt, or a message the service shortened).
 */
const MIN_PREFIX_LENGTH = 16;

/**
 * `text` (a channel's error message, say `Invalid prompt: <the prompt>`) with
 * every repetition of `prompt` masked, for a log line: prompts stay out of
 * logs even when a channel echoes them. A message that repeats only the
 * prompt's start has that start masked (16 characters or more). Anything but
 * a string prompt leaves `text` as it is.
 */
export function maskPrompt(text: string | undefined, prompt: unknown): string | undefined {
  if (!text || typeof prompt !== "string") return text;
  const whole = prompt.trim();
  if (whole.length < MIN_PROMPT_LENGTH) return text;
  if (text.includes(whole)) return text.replaceAll(whole, PROMPT_MASK);
  if (whole.length <= MIN_PREFIX_LENGTH || !text.includes(whole.slice(0, MIN_PREFIX_LENGTH))) {
    return text;
  }
  // The longest start of the prompt the text holds: every shorter start is in it too.
  let low = MIN_PREFIX_LENGTH;
  let high = whole.length - 1;
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if (text.includes(whole.slice(0, middle))) low = middle;
    else high = middle - 1;
  }
  return text.replaceAll(whole.slice(0, low), PROMPT_MASK);
}

/** Texts of a request searched for at most: a conversation's first few turns say enough. */
const MAX_PROMPTS = 16;

/**
 * The texts a request sends a channel that a message may echo: an image
 * task's `prompt`; a Responses body's `instructions` and `input` (a string,
 * or items whose `content` is a string or parts with `text`).
 */
export function promptsOf(request: Readonly<Record<string, unknown>>): string[] {
  const texts: string[] = [];
  const add = (value: unknown) => {
    if (typeof value === "string" && texts.length < MAX_PROMPTS) texts.push(value);
  };
  add(request.prompt);
  add(request.instructions);
  const { input } = request;
  add(input);
  if (Array.isArray(input)) {
    for (const item of input as unknown[]) {
      const content = (item as { content?: unknown } | null)?.content;
      add(content);
      if (Array.isArray(content)) {
        for (const part of content as unknown[]) add((part as { text?: unknown } | null)?.text);
      }
    }
  }
  return texts;
}

/** {@link maskPrompt} for each of `request`'s texts (see {@link promptsOf}). */
export function maskPrompts(
  text: string | undefined,
  request: Readonly<Record<string, unknown>>,
): string | undefined {
  let masked = text;
  for (const prompt of promptsOf(request)) masked = maskPrompt(masked, prompt);
  return masked;
}
