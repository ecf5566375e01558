import { demoChatReply, demoId } from "./demo-chat-reply.js";
import { openEventStream, streamPieces } from "./demo-event-stream.js";
import {
  clientGoneSignal,
  DemoRequestError,
  invalidParam,
  isJsonObject,
  missingParam,
  oneOf,
  readObjectBody,
  sendJson,
  wholeNumber,
} from "./demo-http-helpers.js";
import type { StoredResponse } from "./demo-response-store.js";
import {
  isBackgroundImageRequest,
  startBackgroundImageResponse,
} from "./demo-background-responses.js";
import type { DemoContext, DemoHandler } from "./demo-route.js";
import { ResponseDraft } from "./demo-response-draft.js";
import { DemoImageCall, imageToolOf, pauseFor } from "./demo-image-tool.js";
import { structuredReply } from "./demo-structured-reply.js";

type Json = Record<string, unknown>;
/** A background response is done after this long at least (more for longer replies). */
const MIN_BACKGROUND_MS = 50;

/**
 * `POST /v1/responses`: quotes the last user input back as one assistant message, plain, streamed
 * with the Responses API's event sequence, or (`background: true`) answered `queued` and finished
 * a moment later. Responses are kept (unless `store: false`) for the stored-response routes.
 */
export const handleCreateResponse: DemoHandler = async (req, res, context) => {
  const gone = clientGoneSignal(res);
  const { value: body, bytes } = await readObjectBody(req);
  // Background calls of the image tool are jobs: demo-background-responses.ts.
  if (isBackgroundImageRequest(body)) return startBackgroundImageResponse(res, body, context);
  const { store, background } = checkCreateRequest(body, context);
  const items = inputItems(body.input);
  const echo = demoChatReply(items);
  const text = isJsonObject(body.text) ? (structuredReply(body.text.format, echo) ?? echo) : echo;
  const draft = new ResponseDraft(body, items, text);
  const tool = imageToolOf(body);
  const imageCall = tool && new DemoImageCall(tool, DemoImageCall.promptOf(items));
  const entry: StoredResponse = {
    response: draft.snapshot("completed", true),
    inputItems: items,
    bytes: bytes + text.length * 2,
  };
  if (background && body.stream !== true) {
    finishLater(entry, draft, context);
    sendJson(res, 200, draft.snapshot("queued", false));
    return;
  }
  if (store) context.responses.set(draft.id, entry);
  if (body.stream !== true) {
    if (imageCall) {
      // The picture takes the image delay, as the image routes' do.
      if (!(await pauseFor(context.imageDelayMs, gone))) return;
      entry.response = imageCall.withOutput(entry.response);
      entry.bytes += imageCall.result().length;
    }
    sendJson(res, 200, entry.response);
    return;
  }
  await streamResponse(res, draft, context, gone, imageCall);
  if (imageCall) entry.response = imageCall.withOutput(entry.response);
};

/** Refuses what OpenAI would: no model, an unknown previous response, background without store. */
function checkCreateRequest(
  body: Json,
  context: DemoContext,
): { store: boolean; background: boolean } {
  const { model } = body;
  if (typeof model !== "string" || model.length === 0) {
    throw new DemoRequestError(400, missingParam("model"));
  }
  const previous = body.previous_response_id;
  if (previous !== undefined && previous !== null) {
    if (typeof previous !== "string" || !context.responses.get(previous)) {
      throw new DemoRequestError(400, {
        message: `Previous response with id '${String(previous).slice(0, 100)}' not found.`,
        type: "invalid_request_error",
        param: "previous_response_id",
        code: "previous_response_not_found",
      });
    }
  }
  const store = body.store !== false;
  const background = body.background === true;
  if (background && !store) {
    throw new DemoRequestError(
      400,
      invalidParam("store", "A background response must be stored: drop 'store: false'."),
    );
  }
  return { store, background };
}

/** A background response: stored `in_progress`, completed after about as long as streaming it. */
function finishLater(entry: StoredResponse, draft: ResponseDraft, context: DemoContext): void {
  entry.response = draft.snapshot("in_progress", false);
  const pieces = streamPieces(draft.text).length;
  entry.timer = setTimeout(
    () => {
      entry.response = draft.snapshot("completed", true);
      entry.timer = undefined;
    },
    Math.max(MIN_BACKGROUND_MS, pieces * context.streamDelayMs),
  );
  entry.timer.unref();
  context.responses.set(draft.id, entry);
}

/** The event sequence of a one-message answer, as OpenAI streams it. */
async function streamResponse(
  res: Parameters<DemoHandler>[1],
  draft: ResponseDraft,
  context: DemoContext,
  gone: AbortSignal,
  imageCall?: DemoImageCall,
): Promise<void> {
  const { text } = draft;
  const stream = openEventStream(res, context.streamDelayMs, gone);
  let sequence = 0;
  const send = (type: string, fields: Json) =>
    stream.send({ type, sequence_number: sequence++, ...fields }, type);
  // With the image tool, its call is output item 0 and the message item 1.
  const index = imageCall ? 1 : 0;
  const at = { item_id: draft.messageId, output_index: index, content_index: 0 };
  send("response.created", { response: draft.snapshot("in_progress", false) });
  send("response.in_progress", { response: draft.snapshot("in_progress", false) });
  if (imageCall && !(await imageCall.stream(send, context.imageDelayMs, gone))) return;
  send("response.output_item.added", {
    output_index: index,
    item: draft.message("in_progress", []),
  });
  send("response.content_part.added", { ...at, part: draft.part("") });
  for (const piece of streamPieces(text)) {
    if (!(await stream.pause())) return;
    send("response.output_text.delta", { ...at, delta: piece, logprobs: [] });
  }
  send("response.output_text.done", { ...at, text, logprobs: [] });
  send("response.content_part.done", { ...at, part: draft.part(text) });
  send("response.output_item.done", {
    output_index: index,
    item: draft.message("completed", [draft.part(text)]),
  });
  const final = draft.snapshot("completed", true);
  send("response.completed", { response: imageCall ? imageCall.withOutput(final) : final });
  stream.end();
}

/**
 * The request's `input` as stored items, each with an id: a text is one user message; messages
 * get OpenAI's item shape (text content as `input_text`, or `output_text` for the assistant's);
 * other items (tool outputs, references) are kept as sent.
 */
function inputItems(input: unknown): Json[] {
  if (input === undefined || input === null) return [];
  if (typeof input === "string") {
    return [userMessage([{ type: "input_text", text: input }])];
  }
  if (!Array.isArray(input) || !input.every(isJsonObject)) {
    throw new DemoRequestError(
      400,
      invalidParam("input", "'input' must be a string or a list of input items."),
    );
  }
  return input.map((item) => {
    const isMessage = item.type === "message" || (item.type === undefined && "role" in item);
    if (!isMessage) return { ...item, id: item.id ?? demoId("item_") };
    const assistant = item.role === "assistant";
    const content =
      typeof item.content === "string"
        ? [
            assistant
              ? { type: "output_text", text: item.content, annotations: [] }
              : { type: "input_text", text: item.content },
          ]
        : item.content;
    return {
      id: item.id ?? demoId("msg_"),
      type: "message",
      role: item.role,
      content,
      status: "completed",
    };
  });
}

function userMessage(content: unknown[]): Json {
  return { id: demoId("msg_"), type: "message", role: "user", content, status: "completed" };
}

/** The stored response a route names, or OpenAI's 404. */
function storedResponse(context: DemoContext, id: string): StoredResponse {
  const entry = context.responses.get(id);
  if (!entry) {
    throw new DemoRequestError(404, {
      message: `Response with id '${id.slice(0, 100)}' not found.`,
      type: "invalid_request_error",
      code: "not_found",
    });
  }
  return entry;
}

/** The response id of `/v1/responses/{id}[/...]`. */
function responseIdOf(url: URL): string {
  return decodeURIComponent(url.pathname.split("/")[3] ?? "");
}

/** `GET /v1/responses/{id}`. */
export const handleGetResponse: DemoHandler = async (req, res, context, url) => {
  req.resume();
  sendJson(res, 200, storedResponse(context, responseIdOf(url)).response);
};

/** `DELETE /v1/responses/{id}`. */
export const handleDeleteResponse: DemoHandler = async (req, res, context, url) => {
  req.resume();
  const id = responseIdOf(url);
  storedResponse(context, id);
  context.responses.delete(id);
  sendJson(res, 200, { id, object: "response", deleted: true });
};

/**
 * `POST /v1/responses/{id}/cancel`: a background response still running becomes `cancelled`; a
 * finished one is answered as it is; one not made in the background cannot be cancelled.
 */
export const handleCancelResponse: DemoHandler = async (req, res, context, url) => {
  req.resume();
  const entry = storedResponse(context, responseIdOf(url));
  if (entry.response.background !== true) {
    throw new DemoRequestError(400, {
      message: "Only responses created with background=true can be cancelled.",
      type: "invalid_request_error",
      code: "invalid_value",
    });
  }
  if (entry.timer) {
    clearTimeout(entry.timer);
    entry.timer = undefined;
    entry.response = { ...entry.response, status: "cancelled" };
  }
  sendJson(res, 200, entry.response);
};

/** `GET /v1/responses/{id}/input_items`: OpenAI's cursor list (`limit`, `order`, `after`). */
export const handleInputItems: DemoHandler = async (req, res, context, url) => {
  req.resume();
  const entry = storedResponse(context, responseIdOf(url));
  const query = url.searchParams;
  const limit = wholeNumber(query.get("limit") ?? undefined, "limit", 1, 100, 20);
  const order = oneOf(query.get("order") ?? undefined, "order", ["asc", "desc"], "desc");
  let items = order === "asc" ? entry.inputItems : [...entry.inputItems].reverse();
  const after = query.get("after");
  if (after) {
    const index = items.findIndex((item) => item.id === after);
    items = index === -1 ? [] : items.slice(index + 1);
  }
  const page = items.slice(0, limit);
  sendJson(res, 200, {
    object: "list",
    data: page,
    first_id: page[0]?.id ?? null,
    last_id: page.at(-1)?.id ?? null,
    has_more: items.length > limit,
  });
};
