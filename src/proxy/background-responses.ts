import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../auth/principal.js";
import type { RequestContext } from "../observability/request-context.js";

/** One request the passthrough hands to the service's background responses. */
export interface BackgroundCall {
  req: IncomingMessage;
  res: ServerResponse;
  principal: Principal;
  context: RequestContext;
  /** The query string, without its `?`. */
  query: string;
}

/** A `POST /v1/responses` with `background: true`, read and checked by the passthrough. */
export interface BackgroundCreate extends BackgroundCall {
  /** The body (a `previous_response_id` already as the channel knows it). */
  body: Record<string, unknown>;
  model: string;
  /** The one channel it may run on (the one holding its previous response). */
  pinned?: string;
  /** `previous_response_id` as the client sent it, when the channel is sent another id. */
  previous?: string;
}

/** The routes on a stored response, as the passthrough names them. */
export type ResponseRouteName =
  "responses_get" | "responses_delete" | "responses_cancel" | "responses_input_items";

/**
 * The Responses API's background mode as the service runs it for channels
 * that do not (`channels[].responses.background: own`): the passthrough hands
 * it what is the service's, and passes everything else on as before.
 */
export interface BackgroundResponses {
  /** Answers a background `POST /v1/responses` (a task of the service). */
  create(call: BackgroundCreate): Promise<void>;
  /**
   * Answers a route on response `id` when the service made it (another key's
   * is 404); false, having read and written nothing, when it did not (the
   * passthrough sends it to the channel that made it).
   */
  serve(route: ResponseRouteName, id: string, call: BackgroundCall): Promise<boolean>;
  /**
   * A `previous_response_id` naming a response the service made: the channel
   * that ran it and its id there; undefined when the service did not make it.
   * @throws ServiceError 404 for another key's, 400 for one that cannot be continued
   */
  previous(
    principal: Principal,
    id: string,
  ): Promise<{ channel: string; upstreamId: string } | undefined>;
}
