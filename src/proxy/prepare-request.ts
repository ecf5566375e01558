import type { IncomingMessage } from "node:http";
import { ServiceError } from "../errors/service-error.js";
import { MAX_JSON_DEPTH, parseJson } from "../http/inspect-json.js";
import { scanJson, valueAt, type ScannedJson } from "../http/scan-json.js";
import { requireJsonObject } from "../errors/parse-body.js";
import { bodyAtHand, readRequestBody } from "../http/read-body.js";
import { modelNotFound } from "../models/model-not-found.js";
import { receiveFormHead } from "./form/form-upload.js";
import type { PassthroughRequest } from "./passthrough-request.js";
import { createResponsePreparer, type ResponsePreparerDeps } from "./prepare-response.js";
import { streamImageCount } from "./stream-image-count.js";

/** Body limit of routes that take a prompt and a few fields. */
export const SMALL_BODY_BYTES = 1024 * 1024;

/** Dependencies of {@link createRequestPreparer}: the Responses preparer's, and the body limits. */
export interface RequestPreparerDeps extends Omit<ResponsePreparerDeps, "timing"> {
  limits: {
    maxBodyBytes: number;
    maxUploadBytes: number;
    bodyTimeoutMs: number;
    bodyIdleMs: number;
  };
}

/**
 * Prepares one passthrough request: a promise while it waits on the body or
 * the store, `undefined` when it was done at once. Throws (or rejects with)
 * the 4xx the client gets.
 */
export type RequestPreparer = (
  request: PassthroughRequest,
  req: IncomingMessage,
) => Promise<void> | undefined;

/**
 * Reads what a passthrough request needs before any channel is called: the
 * model its JSON body or form names (checked unambiguous), or the stored
 * response it names (checked owned, `prepare-response.ts`), and from it the
 * candidate channels.
 * Throws the 4xx the client gets; nothing has gone upstream then.
 */
export function createRequestPreparer(deps: RequestPreparerDeps): RequestPreparer {
  const { limits } = deps;
  const timing = { timeoutMs: limits.bodyTimeoutMs, idleMs: limits.bodyIdleMs };
  const responses = createResponsePreparer({ ...deps, timing });

  /**
   * The model a JSON body names, checked; the raw bytes go on as they are.
   * A body already at hand (the usual chat body) is checked at once, without
   * a promise: `undefined` then, unless a Responses call needs the store.
   */
  function prepareJson(
    request: PassthroughRequest,
    req: IncomingMessage,
  ): Promise<void> | undefined {
    const limit =
      request.route.size === "small"
        ? Math.min(SMALL_BODY_BYTES, limits.maxBodyBytes)
        : limits.maxBodyBytes;
    const atHand = bodyAtHand(req, limit);
    if (atHand) return prepareJsonBody(request, atHand);
    return readRequestBody(req, { limit, ...timing }).then((bytes) =>
      prepareJsonBody(request, bytes),
    );
  }

  function prepareJsonBody(request: PassthroughRequest, bytes: Buffer): Promise<void> | undefined {
    const raw = withoutBom(bytes);
    // Most bodies are only passed on: checked as JSON and their `model` read, not parsed.
    const { createsResponse, streamsImages } = request.route;
    const members = streamsImages ? IMAGE_BODY_MEMBERS : BODY_MEMBERS;
    const scanned = raw.length > 0 ? scanJson(raw, members, MAX_JSON_DEPTH) : undefined;
    if (scanned?.isObject && !(createsResponse && asksForResponseWork(scanned))) {
      checkOneModel(scanned.modelKeys);
      setModel(request, modelOf(memberOf(raw, scanned, MODEL)), raw);
      if (streamsImages) request.images = streamImageCount(memberOf(raw, scanned, N));
      return requireCandidates(request);
    }
    // Not JSON, not an object, or a Responses call that needs its fields: parsed whole,
    // which gives the error it always gave.
    const parsed = bytes.length > 0 ? parseJson(bytes, MAX_JSON_DEPTH) : undefined;
    const body = requireJsonObject(parsed?.value);
    checkOneModel(parsed?.modelKeys ?? 0);
    setModel(request, modelOf(body.model), parsed?.raw);
    if (streamsImages) request.images = streamImageCount(body.n);
    if (!createsResponse) return requireCandidates(request);
    return responses.prepareBody(request, body).then(() => requireCandidates(request));
  }

  function requireCandidates(request: PassthroughRequest): undefined {
    if (request.candidates.length === 0) throw modelNotFound(request.model as string);
    return undefined;
  }

  /** The body's model and its candidate channels; the raw bytes go on as they are. */
  function setModel(request: PassthroughRequest, model: string, raw: Buffer | undefined): void {
    request.model = model;
    request.body = raw;
    request.headers["content-type"] = "application/json";
    request.candidates = deps.access.candidates(request.principal, model);
  }

  async function prepareForm(request: PassthroughRequest, req: IncomingMessage): Promise<void> {
    const form = await receiveFormHead(req, {
      maxBytes: limits.maxUploadBytes,
      ...timing,
    });
    request.form = form;
    request.headers["content-type"] = form.contentType;
    request.model = modelOf(form.model);
    request.candidates = deps.access.candidates(request.principal, request.model);
    if (request.candidates.length === 0) throw modelNotFound(request.model);
  }

  return (request, req) => {
    const { body } = request.route;
    if (body === "none") return responses.prepareById(request, req);
    if (body === "form" || (body === "form-or-json" && isMultipart(req))) {
      return prepareForm(request, req);
    }
    return prepareJson(request, req);
  };
}

/** The top-level members of a JSON body the passthrough reads. */
const BODY_MEMBERS = ["model", "previous_response_id", "background"];
/** Those of an image route's body, which may ask for an image stream of `n` images. */
const IMAGE_BODY_MEMBERS = [...BODY_MEMBERS, "n"];
const [MODEL, PREVIOUS, BACKGROUND, N] = [0, 1, 2, 3];

/** A scanned member's value, or `undefined` when the body has none. */
function memberOf(raw: Buffer, scanned: ScannedJson, member: number): unknown {
  const start = scanned.starts[member] as number;
  return start === -1 ? undefined : valueAt(raw, start, scanned.ends[member] as number);
}

/** A Responses call that continues a stored response or runs in the background. */
function asksForResponseWork({ starts }: ScannedJson): boolean {
  return starts[PREVIOUS] !== -1 || starts[BACKGROUND] !== -1;
}

/** The bytes after a UTF-8 byte order mark, as `parseJson` reads them. */
function withoutBom(bytes: Buffer): Buffer {
  return bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? bytes.subarray(3) : bytes;
}

/**
 * Refuses a body that names `model` more than once: parsers disagree on it
 * (first or last wins, keys matched in any case), so the channel could read
 * another model than the one checked here.
 */
function checkOneModel(modelKeys: number): void {
  if (modelKeys > 1) {
    throw new ServiceError(
      "invalid_value",
      "The request body names 'model' more than once (keys are matched in any case); send one 'model'.",
      { param: "model" },
    );
  }
}

function isMultipart(req: IncomingMessage): boolean {
  return /^multipart\/form-data\b/i.test(req.headers["content-type"] ?? "");
}

/** The `model` of a body or form, or the 400 naming it. */
function modelOf(model: unknown): string {
  if (model === undefined || model === null || model === "") {
    throw new ServiceError("missing_required_parameter", "Missing required parameter: 'model'.", {
      param: "model",
    });
  }
  if (typeof model !== "string") {
    throw new ServiceError("invalid_value", "'model' must be a string.", { param: "model" });
  }
  return model;
}
