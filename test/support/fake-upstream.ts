import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createOtherAnswers } from "./fake-answers.js";
import { createConversationAnswers } from "./fake-conversations.js";
import { answerFailure } from "./fake-failures.js";
import { errorEnvelope, pause, readRaw, sendJson } from "./fake-http.js";
import { parseForm, readParts } from "./fake-multipart.js";
import type {
  Behavior,
  FakeRoute,
  FakeUpstream,
  FakeUpstreamOptions,
  RecordedRequest,
  RouteHandler,
} from "./fake-upstream-types.js";
import { modelReadings } from "./json-readings.js";

export type * from "./fake-upstream-types.js";
export { FAKE_SPEECH } from "./fake-answers.js";
export { keySpellings } from "./fake-failures.js";

const DEFAULT_MODELS = ["gpt-4o-mini", "gpt-4o", "gpt-image-1", "dall-e-3"];

const POST_ROUTES: Record<string, FakeRoute> = {
  "/v1/chat/completions": "chat",
  "/v1/images/generations": "images",
  "/v1/responses": "responses",
  "/v1/embeddings": "embeddings",
  "/v1/completions": "completions",
  "/v1/moderations": "moderations",
  "/v1/audio/speech": "speech",
  "/v1/images/edits": "edits",
  "/v1/images/variations": "variations",
  "/v1/audio/transcriptions": "transcriptions",
  "/v1/audio/translations": "translations",
};

function routeOf(method: string, pathname: string): FakeRoute | undefined {
  if (method === "POST" && POST_ROUTES[pathname]) return POST_ROUTES[pathname];
  if (method === "GET" && /^\/v1\/models(\/[^/]+)?$/.test(pathname)) return "models";
  if (/^\/v1\/responses\/[^/]+(\/cancel|\/input_items)?$/.test(pathname)) return "stored-response";
  return undefined;
}

/**
 * Starts a fake OpenAI-compatible gateway on 127.0.0.1 with a free port, to put the service under
 * test in front of real sockets with scripted failures (hangs, resets, garbage, error statuses).
 */
/** Whether a request is one of the service's own model-list checks (its User-Agent says so). */
const isCheck = (req: IncomingMessage) =>
  (req.headers["user-agent"] ?? "").includes("(model-list check)");

export async function startFakeUpstream(options: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const models = options.models ?? DEFAULT_MODELS;
  const name = options.name ?? "fake-upstream";

  const behaviors = new Map<FakeRoute, Behavior>();
  const waiters = new Map<FakeRoute, Array<(request: RecordedRequest) => void>>();
  const requests: RecordedRequest[] = [];
  const checks: RecordedRequest[] = [];
  const extraRoutes = new Map<string, RouteHandler>();
  let inFlight = 0;
  let maxInFlight = 0;
  const inFlightByPrompt = new Map<string, number>();
  let maxInFlightPerPrompt = 0;
  let aborted = 0;
  let closing = false;
  /** Bumped by reset(), so requests from before it no longer touch the counters. */
  let epoch = 0;
  let held = false;
  let releaseHeld: (() => void) | undefined;
  let heldPromise: Promise<void> | undefined;

  const release = (): void => {
    held = false;
    releaseHeld?.();
    releaseHeld = undefined;
    heldPromise = undefined;
  };
  const waitForRelease = (): Promise<void> => {
    if (!held) return Promise.resolve();
    heldPromise ??= new Promise<void>((resolve) => (releaseHeld = resolve));
    return heldPromise;
  };
  /** Waits while streams are held; false when the client went away meanwhile. */
  const holdIfAsked = async (res: ServerResponse): Promise<boolean> => {
    if (!held) return true;
    const gone = new Promise<void>((resolve) => res.once("close", resolve));
    await Promise.race([waitForRelease(), gone]);
    return !res.destroyed;
  };

  const conversations = createConversationAnswers({ name, holdIfAsked });
  const answers = createOtherAnswers({ name, models });

  /** Reads and records a request's body; resolves what the routes answer from. */
  const record = async (req: IncomingMessage, method: string, complete: boolean) => {
    const raw = complete ? await readRaw(req) : Buffer.alloc(0);
    const contentType = String(req.headers["content-type"] ?? "");
    const form =
      complete && contentType.startsWith("multipart/form-data")
        ? parseForm(contentType, raw)
        : undefined;
    let body: unknown;
    const textBody = raw.toString("utf8");
    if (form) body = form.fields;
    else if (raw.length > 0) {
      try {
        body = JSON.parse(textBody) as unknown;
      } catch {
        body = textBody;
      }
    }
    const parts = form ? await readParts(req.headers, raw) : undefined;
    const recorded: RecordedRequest = {
      method,
      path: req.url ?? "/",
      headers: req.headers,
      body,
      raw,
      ...(form ? { form } : raw.length > 0 ? { model: modelReadings(textBody) } : {}),
      ...(parts ? { parts } : {}),
      complete,
    };
    // The service's own model-list checks (start-up, every minute) are kept apart: tests count
    // the calls their clients cause.
    if (isCheck(req)) checks.push(recorded);
    else requests.push(recorded);
    return { recorded, form };
  };

  /** Counts a generation at once per prompt while it is being answered. */
  const countPrompt = (recorded: RecordedRequest, res: ServerResponse, arrivedIn: number) => {
    const prompt = (recorded.body as { prompt?: unknown } | undefined)?.prompt;
    if (typeof prompt !== "string" || arrivedIn !== epoch || res.destroyed) return;
    const count = (inFlightByPrompt.get(prompt) ?? 0) + 1;
    inFlightByPrompt.set(prompt, count);
    maxInFlightPerPrompt = Math.max(maxInFlightPerPrompt, count);
    res.once("close", () => {
      if (arrivedIn !== epoch) return;
      inFlightByPrompt.set(prompt, (inFlightByPrompt.get(prompt) ?? 1) - 1);
    });
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const method = req.method ?? "GET";
    const pathname = new URL(req.url ?? "/", "http://fake.invalid").pathname;
    const route = routeOf(method, pathname);
    let serverDestroyed = false;
    const arrivedIn = epoch;

    const generating = route === "images" || route === "edits";
    if (generating) {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
    }
    res.once("close", () => {
      if (arrivedIn !== epoch) return;
      if (generating) inFlight--;
      if (!res.writableFinished && !serverDestroyed && !closing) aborted++;
    });
    res.setHeader("x-fake-upstream", name);

    const behavior: Behavior = (route && behaviors.get(route)) || { kind: "ok" };
    if (behavior.kind === "reset-early") {
      serverDestroyed = true;
      req.socket.destroy();
      await record(req, method, false);
      return;
    }
    const { recorded, form } = await record(req, method, true);
    if (generating) countPrompt(recorded, res, arrivedIn);
    if (route && !isCheck(req)) {
      const pending = waiters.get(route) ?? [];
      waiters.delete(route);
      for (const resolve of pending) resolve(recorded);
    }

    const extra = extraRoutes.get(pathname);
    if (!route && extra) {
      await extra(req, res, recorded.body);
      return;
    }
    if (!route) {
      sendJson(
        res,
        404,
        errorEnvelope(`Unknown route: ${method} ${pathname}`, "invalid_request_error", "not_found"),
      );
      return;
    }

    const { body } = recorded;
    const fields = (typeof body === "object" && body !== null ? body : {}) as Record<
      string,
      unknown
    >;
    switch (behavior.kind) {
      case "hang":
        return;
      case "custom":
        await behavior.respond(req, res, recorded.body);
        return;
      case "ok":
        if (behavior.delayMs && !(await pause(res, behavior.delayMs))) return;
        switch (route) {
          case "chat":
            return conversations.answerChat(res, fields);
          case "images":
          case "edits":
          case "variations":
            return answers.answerImages(res, fields);
          case "responses":
            return conversations.answerResponses(res, fields);
          case "stored-response":
            return conversations.answerStoredResponse(res, method, pathname);
          case "embeddings":
            return answers.answerEmbeddings(res, fields);
          case "completions":
            return answers.answerCompletions(res, fields);
          case "moderations":
            return answers.answerModerations(res, fields);
          case "speech":
            return answers.answerSpeech(res);
          case "transcriptions":
          case "translations":
            return answers.answerTranscription(res, route, form);
          case "models":
            return answers.answerModels(res, pathname);
        }
        return;
      default:
        if ((await answerFailure(behavior, route, req, res, fields)) === "destroyed") {
          serverDestroyed = true;
        }
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      // The client aborted mid-body (the read throws); nothing left to answer.
      res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  let closed: Promise<void> | undefined;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    origin: `http://127.0.0.1:${port}`,
    requests,
    checks,
    get inFlight() {
      return inFlight;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    get maxInFlightPerPrompt() {
      return maxInFlightPerPrompt;
    },
    get aborted() {
      return aborted;
    },
    behave(route, behavior) {
      behaviors.set(route, behavior);
    },
    serve(pathname, handler) {
      extraRoutes.set(pathname, handler);
    },
    holdStreams() {
      held = true;
    },
    release,
    nextRequest(route) {
      return new Promise((resolve) => {
        const list = waiters.get(route) ?? [];
        list.push(resolve);
        waiters.set(route, list);
      });
    },
    reset() {
      behaviors.clear();
      release();
      requests.length = 0;
      checks.length = 0;
      epoch++;
      inFlight = 0;
      maxInFlight = 0;
      inFlightByPrompt.clear();
      maxInFlightPerPrompt = 0;
      aborted = 0;
    },
    close() {
      closed ??= new Promise<void>((resolve, reject) => {
        closing = true;
        release();
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
