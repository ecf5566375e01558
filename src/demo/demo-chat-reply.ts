/** Longest stretch of the user's message the demo quotes back. */
const MAX_QUOTED_CHARS = 500;

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
    const text = messageText(content).trim().replace(/\s+/g, " ");
    if (text.length === 0) break;
    const quoted = text.length > MAX_QUOTED_CHARS ? `${text.slice(0, MAX_QUOTED_CHARS)}...` : text;
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

/** Text of a chat message `content`: a string, or an array of parts of which the text ones count. */
export function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part: unknown) =>
      typeof part === "object" && part !== null && (part as { type?: unknown }).type === "text"
        ? String((part as { text?: unknown }).text ?? "")
        : "",
    )
    .filter((text) => text.length > 0)
    .join(" ");
}
