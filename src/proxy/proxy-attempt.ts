import type { ClientRequest, OutgoingHttpHeaders } from "node:http";
import type { Principal } from "../auth/principal.js";
import type { Channel } from "../channels/channel.js";
import type { FormBody, FormUpload } from "./form/form-upload.js";
import type { PassthroughRoute } from "./passthrough-routes.js";

/** One client request's walk through its candidate channels. */
export interface ProxyAttempt {
  route: PassthroughRoute;
  principal: Principal;
  /** The model the request named (not on the routes of a stored response). */
  model?: string;
  responseId?: string;
  candidates: Channel[];
  index: number;
  method: string;
  /** Path and query to send, after the channel's `/v1` base. */
  path: string;
  /** The client headers a channel may see. */
  headers: OutgoingHttpHeaders;
  /** A JSON body, sent on byte for byte. */
  body?: Buffer;
  /** A multipart form, streamed. */
  form?: FormUpload;
  /** The form's body stream of the current try. */
  formBody?: FormBody;
  /** Hands an error to the one error writer (nothing sent yet). */
  fail: (err: unknown) => void;
  upstream?: ClientRequest;
  sentAt: number;
  timedOut: boolean;
  /** The current try got response headers: its body's own path handles what follows. */
  responded: boolean;
  clientGone: boolean;
  /** A stale pooled connection was already retried once. */
  staleRetried: boolean;
  /** This service aborted the upstream call itself (the rest of a form was refused). */
  refused: boolean;
}
