import type { ServerResponse } from "node:http";
import { startFakeUpstream, type FakeUpstream, type RouteHandler } from "./fake-upstream.js";

/**
 * A fake new-api / one-api on a real socket: it knows a few user keys, each
 * with its own model list, answers `GET /v1/models` per key (401 for any
 * other key), and counts how often it is asked. Chat and images answer as the
 * fake upstream does, and every request is recorded with its headers, so a
 * test can see which key reached the gateway.
 */
export interface FakeGateway {
  /** `http://127.0.0.1:PORT/v1` */
  baseUrl: string;
  /** The underlying fake, for `behave("models", ...)`, `requests`, `nextRequest`. */
  upstream: FakeUpstream;
  /** `GET /v1/models` requests so far, all keys, or with this bearer key only. */
  modelCalls(key?: string): number;
  /** Back to answering `/v1/models` per key (after a test made it fail). */
  up(): void;
  /**
   * Answers `/v1/models` per key, each answer whole but never ended (chunked, held open after
   * its JSON), as a proxy that never sends the last chunk does.
   */
  hold(): void;
  close(): Promise<void>;
}

/**
 * @param keys user key to the models it may use, in the order the gateway
 *   lists them (tests may give duplicates and any order)
 */
export async function startFakeGateway(keys: Record<string, string[]>): Promise<FakeGateway> {
  const upstream = await startFakeUpstream({ name: "fake-gateway" });
  let held = false;
  const listModels: RouteHandler = (req, res) => {
    const sendJson = held ? sendHeld : sendWhole;
    const match = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "");
    const models = match && Object.hasOwn(keys, match[1]!) ? keys[match[1]!] : undefined;
    if (!models) {
      sendJson(res, 401, {
        error: {
          message: "无效的令牌 (invalid token)",
          type: "new_api_error",
          param: null,
          code: null,
        },
      });
      return;
    }
    sendJson(res, 200, {
      object: "list",
      data: models.map((id) => ({ id, object: "model", created: 1_700_000_000, owned_by: "gw" })),
    });
  };
  const up = () => {
    held = false;
    upstream.behave("models", { kind: "custom", respond: listModels });
  };
  up();
  const isModelsCall = (path: string) => path.split("?")[0] === "/v1/models";
  return {
    baseUrl: upstream.baseUrl,
    upstream,
    modelCalls(key) {
      return upstream.requests.filter(
        (request) =>
          isModelsCall(request.path) &&
          (key === undefined || request.headers.authorization === `Bearer ${key}`),
      ).length;
    },
    up,
    hold() {
      up();
      held = true;
    },
    close: () => upstream.close(),
  };
}

function sendHeld(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" }).write(JSON.stringify(body));
}

function sendWhole(res: ServerResponse, status: number, body: unknown): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(payload),
  });
  res.end(payload);
}
