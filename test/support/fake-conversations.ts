import { randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";
import { errorEnvelope, now, sendJson } from "./fake-http.js";

/** What the chat and Responses API answers of a fake channel need. */
export interface ConversationDeps {
  /** Shows up in every answer: `Hello from <name>!`. */
  name: string;
  /** Waits while the test holds streams; false when the client went away meanwhile. */
  holdIfAsked(res: ServerResponse): Promise<boolean>;
}

/** The words every answer is made of: `Hello from <name>!`. */
export function wordsOf(name: string): string[] {
  return ["Hello ", "from ", `${name}`, "!"];
}

/**
 * Chat completions and the Responses API of a fake channel, plain and
 * streamed, with the responses it created kept for the routes on a stored
 * response.
 */
export function createConversationAnswers(deps: ConversationDeps) {
  const { holdIfAsked } = deps;
  const stored = new Map<string, Record<string, unknown>>();
  const words = wordsOf(deps.name);
  const text = words.join("");

  const answerChat = async (res: ServerResponse, body: Record<string, unknown>) => {
    const model = typeof body.model === "string" ? body.model : "unknown";
    const id = `chatcmpl-fake${randomBytes(8).toString("hex")}`;
    const created = now();
    const usage = {
      prompt_tokens: 5,
      completion_tokens: words.length,
      total_tokens: 5 + words.length,
    };
    if (body.stream !== true) {
      sendJson(res, 200, {
        id,
        object: "chat.completion",
        created,
        model,
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: text, refusal: null },
            logprobs: null,
            finish_reason: "stop",
          },
        ],
        usage,
      });
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const chunk = (delta: Record<string, unknown>, finish: string | null = null): string =>
      `data: ${JSON.stringify({
        id,
        object: "chat.completion.chunk",
        created,
        model,
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      })}\n\n`;
    res.write(chunk({ role: "assistant", content: "" }));
    res.write(chunk({ content: words[0] }));
    if (!(await holdIfAsked(res))) return;
    for (const word of words.slice(1)) res.write(chunk({ content: word }));
    res.write(chunk({}, "stop"));
    const options = body.stream_options as { include_usage?: boolean } | undefined;
    if (options?.include_usage) {
      res.write(
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [], usage })}\n\n`,
      );
    }
    res.end("data: [DONE]\n\n");
  };

  const responseObject = (body: Record<string, unknown>, status: string) => {
    const id = `resp_fake${randomBytes(12).toString("hex")}`;
    const messageId = `msg_fake${randomBytes(8).toString("hex")}`;
    return {
      id,
      object: "response",
      created_at: now(),
      status,
      error: null,
      incomplete_details: null,
      instructions: null,
      model: typeof body.model === "string" ? body.model : "unknown",
      output:
        status === "completed"
          ? [
              {
                type: "message",
                id: messageId,
                status: "completed",
                role: "assistant",
                content: [{ type: "output_text", text, annotations: [] }],
              },
            ]
          : [],
      parallel_tool_calls: true,
      previous_response_id: body.previous_response_id ?? null,
      store: true,
      temperature: 1,
      text: { format: { type: "text" } },
      tool_choice: "auto",
      tools: [],
      top_p: 1,
      truncation: "disabled",
      usage:
        status === "completed"
          ? {
              input_tokens: 7,
              input_tokens_details: { cached_tokens: 0 },
              output_tokens: words.length,
              output_tokens_details: { reasoning_tokens: 0 },
              total_tokens: 7 + words.length,
            }
          : null,
      metadata: {},
      input: body.input,
    };
  };
  const publicResponse = (response: Record<string, unknown>) => {
    const { input: _input, ...visible } = response;
    return visible;
  };

  const answerResponses = async (res: ServerResponse, body: Record<string, unknown>) => {
    const previous = body.previous_response_id;
    if (typeof previous === "string" && !stored.has(previous)) {
      sendJson(
        res,
        404,
        errorEnvelope(
          `Previous response with id '${previous}' not found.`,
          "invalid_request_error",
          "previous_response_not_found",
        ),
      );
      return;
    }
    const background = body.background === true;
    const response = responseObject(body, background ? "queued" : "completed");
    stored.set(response.id, response);
    if (body.stream !== true) {
      sendJson(res, 200, publicResponse(response));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    let sequence = 0;
    const send = (type: string, fields: Record<string, unknown>) =>
      res.write(
        `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...fields })}\n\n`,
      );
    const inProgress = {
      ...publicResponse(response),
      status: "in_progress",
      output: [],
      usage: null,
    };
    const item = (response.output[0] ?? {}) as { id?: string };
    const itemId = item.id ?? "msg_fake";
    send("response.created", { response: inProgress });
    send("response.in_progress", { response: inProgress });
    send("response.output_item.added", {
      output_index: 0,
      item: { type: "message", id: itemId, status: "in_progress", role: "assistant", content: [] },
    });
    send("response.content_part.added", {
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      part: { type: "output_text", text: "", annotations: [] },
    });
    send("response.output_text.delta", {
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      delta: words[0],
    });
    if (!(await holdIfAsked(res))) return;
    for (const word of words.slice(1)) {
      send("response.output_text.delta", {
        item_id: itemId,
        output_index: 0,
        content_index: 0,
        delta: word,
      });
    }
    send("response.output_text.done", { item_id: itemId, output_index: 0, content_index: 0, text });
    send("response.content_part.done", {
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      part: { type: "output_text", text, annotations: [] },
    });
    send("response.output_item.done", { output_index: 0, item: response.output[0] });
    send("response.completed", { response: publicResponse(response) });
    res.end();
  };

  const answerStoredResponse = (res: ServerResponse, method: string, pathname: string): void => {
    const [, id, action] = /^\/v1\/responses\/([^/]+)(\/[a-z_]+)?$/.exec(pathname) ?? [];
    const response = stored.get(id ?? "");
    if (!response) {
      sendJson(
        res,
        404,
        errorEnvelope(`Response with id '${id}' not found.`, "invalid_request_error", null),
      );
      return;
    }
    if (method === "DELETE" && !action) {
      stored.delete(id as string);
      sendJson(res, 200, { id, object: "response", deleted: true });
    } else if (method === "POST" && action === "/cancel") {
      response.status = "cancelled";
      sendJson(res, 200, publicResponse(response));
    } else if (method === "GET" && action === "/input_items") {
      const itemId = `msg_in${String(id).slice(-8)}`;
      sendJson(res, 200, {
        object: "list",
        data: [
          {
            id: itemId,
            type: "message",
            role: "user",
            content: [{ type: "input_text", text: String(response.input ?? "") }],
          },
        ],
        first_id: itemId,
        last_id: itemId,
        has_more: false,
      });
    } else if (method === "GET" && !action) {
      sendJson(res, 200, publicResponse(response));
    } else {
      sendJson(res, 404, errorEnvelope("Unknown route", "invalid_request_error", "not_found"));
    }
  };

  return { answerChat, answerResponses, answerStoredResponse };
}
