import { randomBytes } from "node:crypto";

/** Longest stretch of the user's message the demo quotes back. */
export const MAX_QUOTED_CHARS = 500;

/**
 * Builds the demo channel's local answer: it quotes the last user message, which shows that the
 * request went through the service and reached a channel without pretending to be a model.
 */
export function demoChatReply(messages: readonly unknown[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (typeof message !== "object" || message === null) continue;
    const { role, content } = message as { role?: unknown; content?: unknown };
    if (role !== "user") continue;
    const quoted = quote(messageText(content));
    if (quoted.length === 0) break;
    return `Demo reply to: ${quoted}`;
  }
  return "Demo reply: send a user message and the demo channel will echo it back.";
}

/**
 * Rough token count (about four characters a token), so usage numbers look plausible and grow
 * with the text; the demo has no tokenizer.
 */
export function estimateTokens(text: string): number {
  return text.length === 0 ? 0 : Math.max(1, Math.ceil(text.length / 4));
}

/** Part types that carry text: chat's `text`, the Responses API's `input_text` and `output_text`. */
const TEXT_PARTS = new Set(["text", "input_text", "output_text"]);

/**
 * Text of a chat message's or Responses API input message's `content`: a string, or an array of
 * parts of which the text ones count.
 */
export function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part: unknown) =>
      typeof part === "object" &&
      part !== null &&
      TEXT_PARTS.has(String((part as { type?: unknown }).type))
        ? String((part as { text?: unknown }).text ?? "")
        : "",
    )
    .filter((text) => text.length > 0)
    .join(" ");
}

/** Shortens text the demo quotes back to {@link MAX_QUOTED_CHARS}, on one line. */
export function quote(text: string): string {
  const line = text.trim().replace(/\s+/g, " ");
  return line.length > MAX_QUOTED_CHARS ? `${line.slice(0, MAX_QUOTED_CHARS)}...` : line;
}

/** An object id in OpenAI's style: a prefix and 48 random hex digits (`resp_...`, `msg_...`). */
export function demoId(prefix: string): string {
  return `${prefix}${randomBytes(24).toString("hex")}`;
}
