/** How a passthrough route takes its body. */
export type RouteBody =
  /** JSON with a `model` (read whole, checked, sent on byte for byte). */
  | "json"
  /** `multipart/form-data` with a `model` field (streamed), or JSON. */
  | "form-or-json"
  /** `multipart/form-data` with a `model` field, streamed. */
  | "form"
  /** No body: the route names a response the service recorded. */
  | "none";

/** One OpenAI route the service passes through to a channel. */
export interface PassthroughRoute {
  /** Label of the upstream call in metrics. */
  name: string;
  /** Route template in the HTTP metrics. */
  template: string;
  body: RouteBody;
  /**
   * Which JSON limit applies: `small` for a prompt and a few fields
   * (1 MiB, or `server.maxBodyBytes` if lower), `large` for
   * `server.maxBodyBytes` (chat with images, embeddings inputs).
   */
  size: "small" | "large";
  /** `image`: the channel's `imageTimeoutSec`; `chat`: its `timeoutSec`. */
  timeout: "chat" | "image";
  /** Answers create Responses API objects whose owner is recorded. */
  createsResponse?: boolean;
  /**
   * Answers may be image streams (`stream: true`): one ends after its `n`-th
   * `image_generation.completed` or `image_edit.completed` event.
   */
  streamsImages?: boolean;
  /** Token usage in answers is counted (not on reads of a stored response). */
  countsUsage: boolean;
  /**
   * The GenAI operation (OpenTelemetry semantic conventions) in spans and the
   * GenAI metrics; none for reads of a stored response.
   */
  operation?: string;
}

const json = (
  name: string,
  template: string,
  operation: string,
  size: "small" | "large",
  timeout: "chat" | "image" = "chat",
): PassthroughRoute => ({
  name,
  template,
  body: "json",
  size,
  timeout,
  countsUsage: true,
  operation,
});

const form = (
  name: string,
  template: string,
  operation: string,
  timeout: "chat" | "image",
): PassthroughRoute => ({
  name,
  template,
  body: "form",
  size: "large",
  timeout,
  countsUsage: true,
  operation,
});

/** `POST` routes, by path. */
export const POST_ROUTES: Readonly<Record<string, PassthroughRoute>> = {
  "/v1/chat/completions": json("chat_completions", "/v1/chat/completions", "chat", "large"),
  "/v1/responses": {
    ...json("responses", "/v1/responses", "chat", "large"),
    createsResponse: true,
  },
  "/v1/completions": json("completions", "/v1/completions", "text_completion", "large"),
  "/v1/embeddings": json("embeddings", "/v1/embeddings", "embeddings", "large"),
  "/v1/moderations": json("moderations", "/v1/moderations", "moderation", "large"),
  "/v1/audio/speech": json("audio_speech", "/v1/audio/speech", "speech", "small"),
  "/v1/images/generations": {
    ...json("images_generations", "/v1/images/generations", "image_generation", "small", "image"),
    streamsImages: true,
  },
  "/v1/images/edits": {
    ...form("images_edits", "/v1/images/edits", "image_generation", "image"),
    body: "form-or-json",
    streamsImages: true,
  },
  "/v1/images/variations": form(
    "images_variations",
    "/v1/images/variations",
    "image_generation",
    "image",
  ),
  "/v1/audio/transcriptions": form(
    "audio_transcriptions",
    "/v1/audio/transcriptions",
    "transcription",
    "chat",
  ),
  "/v1/audio/translations": form(
    "audio_translations",
    "/v1/audio/translations",
    "translation",
    "chat",
  ),
};

const byId = (name: string, template: string): PassthroughRoute => ({
  name,
  template,
  body: "none",
  size: "small",
  timeout: "chat",
  countsUsage: false,
});

/** Routes on a response the service recorded: `{METHOD} {suffix}` after `/v1/responses/{id}`. */
export const RESPONSE_ROUTES: Readonly<Record<string, PassthroughRoute>> = {
  "GET ": byId("responses_get", "/v1/responses/{id}"),
  "DELETE ": byId("responses_delete", "/v1/responses/{id}"),
  "POST /cancel": byId("responses_cancel", "/v1/responses/{id}/cancel"),
  "GET /input_items": byId("responses_input_items", "/v1/responses/{id}/input_items"),
};

const RESPONSE_PATH = /^\/v1\/responses\/([^/]+)(\/[a-z_]+)?$/;

/** A request matched to a passthrough route. */
export interface RouteMatch {
  route: PassthroughRoute;
  /** The response id of a {@link RESPONSE_ROUTES} route. */
  responseId?: string;
}

/** The passthrough route of a request, or `undefined` (Express answers it). */
export function matchPassthroughRoute(method: string, path: string): RouteMatch | undefined {
  if (method === "POST") {
    const route = POST_ROUTES[path];
    if (route) return { route };
  }
  if (!path.startsWith("/v1/responses/")) return undefined;
  const match = RESPONSE_PATH.exec(path);
  if (!match) return undefined;
  const route = RESPONSE_ROUTES[`${method} ${match[2] ?? ""}`];
  return route ? { route, responseId: match[1] as string } : undefined;
}
