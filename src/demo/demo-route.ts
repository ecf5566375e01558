import type { IncomingMessage, ServerResponse } from "node:http";
import type { DemoResponseStore } from "./demo-response-store.js";

/** What every demo route handler gets besides the request. */
export interface DemoContext {
  /** How long an image generation, edit or variation takes. */
  imageDelayMs: number;
  /** Pause between streamed words. */
  streamDelayMs: number;
  /** The Responses API objects the demo created, for the stored-response routes. */
  responses: DemoResponseStore;
}

/**
 * One route of the demo channel. It answers, or throws a `DemoRequestError` that the router turns
 * into OpenAI's error envelope.
 */
export type DemoHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  context: DemoContext,
  url: URL,
) => Promise<void>;
