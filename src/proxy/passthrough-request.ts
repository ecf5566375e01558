import type { Principal } from "../auth/principal.js";
import type { Channel } from "../channels/channel.js";
import type { FormUpload } from "./form/form-upload.js";
import type { PassthroughRoute } from "./passthrough-routes.js";

/**
 * One client request on a passthrough route, as it goes to the channel
 * client: what {@link createRequestPreparer} read of it, and where it may go.
 * How the call to each channel fares is the channel client's (see
 * `ChannelTry`); this holds only what is the passthrough's own.
 */
export interface PassthroughRequest {
  route: PassthroughRoute;
  principal: Principal;
  /** The model the request named (not on the routes of a stored response). */
  model?: string;
  responseId?: string;
  /** The channels that may serve it, in the order to try them. */
  candidates: Channel[];
  method: "GET" | "POST" | "DELETE";
  /** Path and query to send, after the channel's `/v1` base. */
  path: string;
  /** The client headers a channel may see, and the body's `content-type`. */
  headers: Record<string, string | string[] | undefined>;
  /**
   * How many images the answer, if it is an image stream, delivers (the
   * JSON body's `n`, see `streamImageCount`); a form's is its own.
   */
  images?: number;
  /** A JSON body, sent on byte for byte. */
  body?: Buffer;
  /** A multipart form, streamed. */
  form?: FormUpload;
  /**
   * A `POST /v1/responses` with `background: true`: its body as parsed (a
   * `previous_response_id` already as the channel knows it), the channel it
   * is pinned to, and the `previous_response_id` the client sent.
   */
  background?: { body: Record<string, unknown>; pinned?: string; previous?: string };
}
