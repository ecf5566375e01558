import { parse as parseQuery } from "node:querystring";
import type { ServerResponse } from "node:http";
import { ServiceError } from "../../errors/service-error.js";
import { readRequestBody } from "../../http/read-body.js";
import { publicBaseUrl, type PublicOrigin } from "../../http/public-base-url.js";
import type { Metrics } from "../../metrics/create-metrics.js";
import type {
  BackgroundCall,
  BackgroundCreate,
  BackgroundResponses,
  ResponseRouteName,
} from "../../proxy/background-responses.js";
import type { TaskRecord } from "../core/task-record.js";
import type { BackgroundResponsesFeature } from "../create-image-tasks.js";
import { presentResponse } from "../responses/present-response.js";
import { responseNotFound } from "../responses/response-service.js";
import { inputItemsPage } from "../responses/input-items.js";
import { streamResponseEvents } from "./response-event-stream.js";
import { sendPresented } from "./send-presented.js";
import { StreamSlots, type StreamLimits } from "./stream-slots.js";
import { idempotencyKeyOf } from "./submission-headers.js";

/** The routes on a stored response take no body; whatever a client sends is read and dropped. */
const BY_ID_BODY_BYTES = 64 * 1024;

/** Dependencies of {@link createBackgroundResponses}. */
export interface BackgroundResponsesDeps {
  responses: BackgroundResponsesFeature;
  /** Where the origin a submission came to comes from (its webhook event's base). */
  origin: PublicOrigin;
  /** Event streams open at once, per key and in all (`events`). */
  events: StreamLimits;
  /** A comment line this often keeps idle streams open (`imageTasks.eventsKeepAliveSec`). */
  keepAliveMs: number;
  /** How long a body may take, in all and silent. */
  timing: { timeoutMs: number; idleMs: number };
  metrics: Metrics;
}

/**
 * The Responses API's background mode over HTTP, as the passthrough hands it
 * over: a background `POST /v1/responses` answered at once with the queued
 * response (or its event stream, `stream: true`), and `GET` (also
 * `?stream=true&starting_after=N`), `POST .../cancel`, `DELETE` and
 * `GET .../input_items` on the responses the service made, in OpenAI's shapes.
 */
export function createBackgroundResponses(deps: BackgroundResponsesDeps): BackgroundResponses {
  const { service, imageStore } = deps.responses;
  const slots = new StreamSlots(deps.events, (reason) =>
    deps.metrics.taskEventStreamsRefused.inc({ reason }),
  );
  const stream = { responses: deps.responses, slots, keepAliveMs: deps.keepAliveMs };
  const send = (res: ServerResponse, record: TaskRecord, headers: Record<string, string> = {}) => {
    for (const [name, value] of Object.entries({ "Cache-Control": "no-store", ...headers })) {
      res.setHeader(name, value);
    }
    return sendPresented(res, 200, presentResponse(record, imageStore), () =>
      responseNotFound(record.id),
    );
  };

  return {
    async create(call) {
      // A stream's place is taken before the response exists: a refusal leaves none behind.
      const release = call.body.stream === true ? slots.take(call.principal.subject) : undefined;
      try {
        const { record, replayed } = await service.create(call.principal, backgroundOf(call), {
          idempotencyKey: idempotencyKeyOf(call.req),
          baseUrl: publicBaseUrl(call.req, deps.origin),
          span: call.context.span,
        });
        const headers: Record<string, string> = replayed ? { "Idempotent-Replayed": "true" } : {};
        if (release) {
          await streamResponseEvents(stream, call, record, -1, headers, release);
          return;
        }
        await send(call.res, record, headers);
      } finally {
        release?.();
      }
    },

    async serve(route, id, call) {
      const found = await service.lookup(id);
      if (!found) return false;
      await readRequestBody(call.req, { limit: BY_ID_BODY_BYTES, ...deps.timing });
      const record = await service.get(call.principal, id);
      call.context.model = record.model;
      await answer(route, record, call);
      return true;
    },

    previous: (principal, id) => service.previous(principal, id),
  };

  async function answer(route: ResponseRouteName, record: TaskRecord, call: BackgroundCall) {
    const { res, principal } = call;
    switch (route) {
      case "responses_get": {
        const query = parseQuery(call.query);
        if (query.stream === "true") {
          await streamResponseEvents(stream, call, record, startingAfter(query.starting_after));
          return;
        }
        await send(res, record);
        return;
      }
      case "responses_cancel":
        await send(res, await service.cancel(principal, record));
        return;
      case "responses_delete":
        await service.delete(principal, record);
        sendJsonNoStore(res, { id: record.id, object: "response", deleted: true });
        return;
      case "responses_input_items":
        sendJsonNoStore(res, inputItemsPage(record, parseQuery(call.query)));
        return;
    }
  }
}

/** The service's request of a background create. */
function backgroundOf(call: BackgroundCreate) {
  return {
    body: call.body,
    model: call.model,
    ...(call.pinned === undefined ? {} : { pinned: call.pinned }),
    ...(call.previous === undefined ? {} : { previous: call.previous }),
  };
}

/** `starting_after`: a sequence number (0 or more); absent, from the first event. */
function startingAfter(value: string | string[] | undefined): number {
  if (value === undefined) return -1;
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || !/^\d{1,9}$/.test(text)) {
    throw new ServiceError(
      "invalid_value",
      "'starting_after' must be a whole number of 0 or more.",
      {
        param: "starting_after",
      },
    );
  }
  return Number(text);
}

function sendJsonNoStore(res: ServerResponse, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(200, {
    "Cache-Control": "no-store",
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": Buffer.byteLength(text),
  });
  res.end(text);
}
