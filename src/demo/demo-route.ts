import type { IncomingMessage, ServerResponse } from "node:http";
import type { DemoJobs } from "./demo-background-jobs.js";
import type { DemoResponseStore } from "./demo-response-store.js";

/** What every demo route handler gets besides the request. */
export interface DemoContext {
  /** How long an image generation, edit or variation takes. */
  imageDelayMs: number;
  /** Pause between streamed words. */
  streamDelayMs: number;
  /** The Responses API objects the demo created, for the stored-response routes. */
  responses: DemoResponseStore;
  /** Generations run as jobs of the demo's own (its async image APIs, background responses). */
  jobs: DemoJobs;
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
