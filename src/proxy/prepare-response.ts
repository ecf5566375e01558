import type { IncomingMessage } from "node:http";
import type { Principal } from "../auth/principal.js";
import { ServiceError } from "../errors/service-error.js";
import { shorten } from "../errors/shorten.js";
import { readRequestBody } from "../http/read-body.js";
import type { ModelAccess } from "../models/model-access.js";
import type { BackgroundResponses } from "./background-responses.js";
import type { PassthroughRequest } from "./passthrough-request.js";
import type { ResponseOwners } from "./response-owners.js";

/** The routes on a stored response take no body; whatever a client sends is read and dropped. */
const BY_ID_BODY_BYTES = 64 * 1024;

/** Dependencies of {@link createResponsePreparer}. */
export interface ResponsePreparerDeps {
  access: ModelAccess;
  responseOwners: ResponseOwners;
  /** The service's own background responses, when it runs them. */
  background?: Pick<BackgroundResponses, "previous"> | undefined;
  /** How long a body may take in all, and stall (`server.bodyTimeoutSec`, `bodyIdleSec`). */
  timing: { timeoutMs: number; idleMs: number };
}

/** What a passthrough request on the Responses API needs before a channel is called. */
export interface ResponsePreparer {
  /**
   * A `POST /v1/responses` body: a previous response lives on one channel
   * and belongs to one key; one the service ran in the background is sent as
   * the channel's own id for it. A background call is marked for the service
   * to take.
   */
  prepareBody(request: PassthroughRequest, body: Record<string, unknown>): Promise<void>;
  /** A route on a stored response (`GET`, `DELETE`, `cancel`, `input_items`): its channel. */
  prepareById(request: PassthroughRequest, req: IncomingMessage): Promise<void>;
}

/**
 * Reads a Responses call's stored response, checked owned by the caller's
 * key: another key's response answers as an unknown one (404), so ids cannot
 * be probed.
 */
export function createResponsePreparer(deps: ResponsePreparerDeps): ResponsePreparer {
  async function ownedResponse(id: string, principal: Principal, param: string | null) {
    let owner;
    try {
      owner = await deps.responseOwners.lookup(id);
    } catch (err) {
      throw new ServiceError("store_unavailable", "The service's store cannot be reached.", {
        cause: err,
      });
    }
    if (!owner || owner.owner !== principal.subject) throw responseNotFound(id, param);
    return owner;
  }

  return {
    async prepareBody(request, body) {
      const previous = body.previous_response_id;
      checkType(previous, "string", "previous_response_id");
      checkType(body.background, "boolean", "background");
      let sent = body;
      let pinned: string | undefined;
      if (typeof previous === "string") {
        const ours = await deps.background?.previous(request.principal, previous);
        if (ours) {
          sent = { ...body, previous_response_id: ours.upstreamId };
          request.body = Buffer.from(JSON.stringify(sent));
          pinned = ours.channel;
        } else {
          pinned = (await ownedResponse(previous, request.principal, "previous_response_id"))
            .channel;
        }
        request.candidates = request.candidates.filter((channel) => channel.name === pinned);
      }
      if (body.background === true) {
        // The service streams a background response itself: `stream` is its to read.
        checkType(body.stream, "boolean", "stream");
        request.background = {
          body: sent,
          ...(pinned === undefined ? {} : { pinned }),
          ...(sent !== body ? { previous: previous as string } : {}),
        };
      }
    },

    async prepareById(request, req) {
      await readRequestBody(req, { limit: BY_ID_BODY_BYTES, ...deps.timing });
      const owner = await ownedResponse(request.responseId as string, request.principal, null);
      const channel = deps.access.channelFor(request.principal, owner.channel);
      if (!channel) throw responseNotFound(request.responseId as string, null);
      request.candidates = [channel];
    },
  };
}

/**
 * Refuses a field the service acts on when it is there (not null) with
 * another JSON type than OpenAI's API takes: the service would read it one
 * way (not a background call, no previous response) and the channel perhaps
 * another; OpenAI's API refuses it too.
 */
function checkType(value: unknown, type: "string" | "boolean", param: string): void {
  if (value === undefined || value === null || typeof value === type) return;
  throw new ServiceError("invalid_value", `Invalid '${param}': must be a ${type}.`, { param });
}

/** One answer for "unknown" and "another key's", so ids cannot be probed. */
function responseNotFound(id: string, param: string | null): ServiceError {
  return new ServiceError("response_not_found", `No response found with id '${shorten(id)}'.`, {
    param,
  });
}
