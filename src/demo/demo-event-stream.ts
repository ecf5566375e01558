import type { ServerResponse } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";

/** An open `text/event-stream` answer of the demo channel. */
export interface DemoEventStream {
  /**
   * Writes one event as `data: <json>`; with `event`, an `event:` line first, as the Responses
   * API sends its events.
   */
  send(data: unknown, event?: string): void;
  /** Waits the pacing delay between words; `false` when the client went away meanwhile. */
  pause(): Promise<boolean>;
  /** Ends the stream; chat and completions streams end with `data: [DONE]`. */
  end(options?: { done?: boolean }): void;
}

/**
 * Starts a server-sent event stream, with the headers OpenAI sends. Words are paced by
 * `delayMs` so streaming is visible in a terminal, and the pacing stops when the client leaves.
 */
export function openEventStream(
  res: ServerResponse,
  delayMs: number,
  gone: AbortSignal,
): DemoEventStream {
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  return {
    send(data, event) {
      const line = `data: ${JSON.stringify(data)}\n\n`;
      res.write(event === undefined ? line : `event: ${event}\n${line}`);
    },
    async pause() {
      try {
        await sleep(delayMs, undefined, { signal: gone });
        return true;
      } catch {
        return false;
      }
    },
    end(options) {
      res.end(options?.done ? "data: [DONE]\n\n" : undefined);
    },
  };
}

/** Splits a reply into stream pieces: words keep their trailing space, so they join back exactly. */
export function streamPieces(text: string): string[] {
  return text.length === 0 ? [] : text.split(/(?<= )/);
}
