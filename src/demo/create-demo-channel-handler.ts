import type { RequestListener } from "node:http";
import { handleSpeech, handleTranscriptions, handleTranslations } from "./demo-audio.js";
import { handleChat } from "./demo-chat.js";
import { handleCompletions } from "./demo-completions.js";
import { handleEmbeddings } from "./demo-embeddings.js";
import { DemoRequestError, sendJson, sendOpenAiError } from "./demo-http-helpers.js";
import { handleImageEdits, handleImageGenerations, handleImageVariations } from "./demo-images.js";
import { DEMO_MODELS } from "./demo-models.js";
import { handleModerations } from "./demo-moderations.js";
import { createDemoResponseStore, type DemoResponseStore } from "./demo-response-store.js";
import {
  handleCancelResponse,
  handleCreateResponse,
  handleDeleteResponse,
  handleGetResponse,
  handleInputItems,
} from "./demo-responses.js";
import type { DemoContext, DemoHandler } from "./demo-route.js";
import { createDemoJobs, type DemoJobs } from "./demo-background-jobs.js";
import {
  backgroundJobsFirst,
  handleCancelBackgroundResponse,
  handleGetBackgroundResponse,
} from "./demo-background-responses.js";
import { bifrostPoll, bifrostSubmit, sub2apiPoll, sub2apiSubmit } from "./demo-async-images.js";

/** What the demo channel's request handler needs. */
export interface DemoChannelHandlerOptions {
  /** How long an image generation, edit or variation takes, to imitate a slow image model. */
  imageDelayMs: number;
  /** Pause between streamed words, so streaming is visible in a terminal. Default 20 ms. */
  streamChunkDelayMs?: number;
  /** Where created responses are kept. Default: a fresh bounded in-memory store. */
  responses?: DemoResponseStore;
  /** Where async image jobs are kept. Default: a fresh bounded in-memory store. */
  jobs?: DemoJobs;
}

/** Fixed so `/v1/models` answers the same on every start. */
const MODELS_CREATED = 1_700_000_000;

/** Every route the demo answers, by `METHOD path`; `{id}` stands for a stored response's id. */
const ROUTES: Readonly<Record<string, DemoHandler>> = {
  "GET /v1/models": async (req, res) => {
    req.resume();
    sendJson(res, 200, { object: "list", data: DEMO_MODELS.map(modelObject) });
  },
  "GET /v1/models/{id}": async (req, res, _context, url) => {
    req.resume();
    const id = decodeURIComponent(url.pathname.slice("/v1/models/".length));
    if (!DEMO_MODELS.includes(id)) {
      throw new DemoRequestError(404, {
        message: `The model '${id.slice(0, 100)}' does not exist on the demo channel.`,
        code: "model_not_found",
      });
    }
    sendJson(res, 200, modelObject(id));
  },
  "POST /v1/chat/completions": handleChat,
  "POST /v1/responses": handleCreateResponse,
  // Background image jobs (demo-background-responses.ts) first, other responses as stored.
  "GET /v1/responses/{id}": backgroundJobsFirst(handleGetBackgroundResponse, handleGetResponse),
  "DELETE /v1/responses/{id}": handleDeleteResponse,
  "POST /v1/responses/{id}/cancel": backgroundJobsFirst(
    handleCancelBackgroundResponse,
    handleCancelResponse,
  ),
  "GET /v1/responses/{id}/input_items": handleInputItems,
  "POST /v1/completions": handleCompletions,
  "POST /v1/embeddings": handleEmbeddings,
  "POST /v1/moderations": handleModerations,
  "POST /v1/images/generations": handleImageGenerations,
  "POST /v1/images/edits": handleImageEdits,
  "POST /v1/images/variations": handleImageVariations,
  // Async image APIs (demo-async-images.ts): sub2api's, then Bifrost's.
  "POST /v1/images/generations/async": sub2apiSubmit("generations"),
  "POST /v1/images/edits/async": sub2apiSubmit("edits"),
  "GET /v1/images/tasks/{id}": sub2apiPoll,
  "POST /v1/async/images/generations": bifrostSubmit("generations"),
  "POST /v1/async/images/edits": bifrostSubmit("edits"),
  "GET /v1/async/images/generations/{id}": bifrostPoll,
  "GET /v1/async/images/edits/{id}": bifrostPoll,
  "POST /v1/audio/speech": handleSpeech,
  "POST /v1/audio/transcriptions": handleTranscriptions,
  "POST /v1/audio/translations": handleTranslations,
};

/**
 * The route key of a path: an id segment after `/v1/models/`, `/v1/responses/`,
 * `/v1/images/tasks/` or `/v1/async/images/{generations,edits}/` becomes `{id}`.
 */
function routeKey(method: string, path: string): string {
  return `${method} ${path.replace(ID_SEGMENT, "$1/{id}")}`;
}

const ID_SEGMENT =
  /^(\/v1\/(?:models|responses|images\/tasks|async\/images\/(?:generations|edits)))\/[^/]+/;

/**
 * Builds the demo channel: a small OpenAI-compatible API answered in-process, so the service's
 * proxy can talk to it exactly like to a real gateway and a fresh install works with no account.
 * It answers every route the service passes through, with made-up content of the right shape:
 * chat, responses (and the stored-response routes), completions, embeddings, moderations, image
 * generations, edits and variations, speech, transcriptions and translations; and image
 * generations as jobs, in sub2api's, Bifrost's and OpenAI's background dialects.
 *
 * Any model id is accepted (the service decides which models reach a channel); `/v1/models`
 * lists {@link DEMO_MODELS}.
 */
export function createDemoChannelHandler(options: DemoChannelHandlerOptions): RequestListener {
  const context: DemoContext = {
    imageDelayMs: options.imageDelayMs,
    streamDelayMs: options.streamChunkDelayMs ?? 20,
    responses: options.responses ?? createDemoResponseStore(),
    jobs: options.jobs ?? createDemoJobs(),
  };

  return (req, res) => {
    const method = req.method ?? "GET";
    const url = new URL(req.url ?? "/", "http://demo.invalid");
    const path = url.pathname.replace(/\/+$/, "");
    const handler = ROUTES[routeKey(method, path)];
    if (!handler) {
      // Drain the body so the connection stays usable for keep-alive.
      req.resume();
      sendOpenAiError(res, 404, {
        message: `Unknown route: ${method} ${(path || "/").slice(0, 200)}`,
        code: "not_found",
      });
      return;
    }
    handler(req, res, context, url).catch((error: unknown) => {
      if (res.headersSent || res.destroyed) {
        res.destroy();
      } else if (error instanceof DemoRequestError) {
        sendOpenAiError(res, error.status, error.body);
      } else {
        sendOpenAiError(res, 500, {
          message: `The demo channel failed: ${error instanceof Error ? error.message : String(error)}`,
          code: "internal_error",
        });
      }
    });
  };
}

function modelObject(id: string): Record<string, unknown> {
  return { id, object: "model", created: MODELS_CREATED, owned_by: "demo" };
}
