import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { TEST_KEYS } from "../../support/start-test-app.js";
import { cancelTask, submitOk, useApp, waitForStatus, type Target } from "../task-api.js";

// `GET /v1/images/tasks/{id}` and `POST /v1/images/tasks` are answered by the
// task lane beside Express; a trailing `/` (or HEAD) still reaches Express's
// routes. Both must answer alike, byte for byte where it matters.

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One request with any headers (Host included), through node:http. */
function send(
  target: Target,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
) {
  const url = new URL(target.url);
  return new Promise<RawAnswer>((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const get = (target: Target, path: string, headers: Record<string, string> = {}) =>
  send(target, "GET", path, headers);

/** What a client can tell of an answer. */
function shown(answer: RawAnswer) {
  const { headers } = answer;
  return {
    status: answer.status,
    body: JSON.parse(answer.text) as unknown,
    "content-type": headers["content-type"],
    "content-length": headers["content-length"],
    "cache-control": headers["cache-control"],
    "retry-after": headers["retry-after"],
    location: headers.location,
    "idempotent-replayed": headers["idempotent-replayed"],
    "preference-applied": headers["preference-applied"],
  };
}

/** The lane's answer and Express's route's (trailing slash) answer to the same poll. */
async function bothWays(target: Target, id: string, query = "", headers = {}) {
  const lane = await get(target, `/v1/images/tasks/${id}${query}`, headers);
  const router = await get(target, `/v1/images/tasks/${id}/${query}`, headers);
  return { lane: shown(lane), router: shown(router) };
}

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

describe("the task poll lane", () => {
  it("answers every status and format as Express's route does", async () => {
    const app = await useApp();
    const url = await submitOk(app, { prompt: "as url", response_format: "url" });
    const b64 = await submitOk(app, { prompt: "as b64" });
    await waitForStatus(app, url, ["completed"]);
    await waitForStatus(app, b64, ["completed"]);
    app.upstream.behave("images", { kind: "hang" });
    const queued = await submitOk(app, { prompt: "hangs" });
    const cancelled = await submitOk(app, { prompt: "cancelled" });
    expect((await cancelTask(app, cancelled)).status).toBe(200);

    for (const id of [url, b64, queued, cancelled]) {
      const { lane, router } = await bothWays(app, id, "", auth(app.key));
      expect(lane.status).toBe(200);
      expect(lane).toEqual(router);
    }
    const { lane } = await bothWays(app, url, "", auth(app.key));
    expect(lane["content-type"]).toBe("application/json; charset=utf-8");
    expect(lane["cache-control"]).toBe("no-store");
    expect(lane.body).toMatchObject({
      status: "completed",
      data: [{ url: expect.stringContaining(`${app.url}/v1/images/files/${url}/0.png?`) }],
    });
    const pending = await bothWays(app, queued, "", auth(app.key));
    expect(pending.lane["retry-after"]).toBe(String(app.config.imageTasks.pollIntervalSec));
  });

  it("refuses alike: unknown ids, another owner's task, missing or wrong keys, bad waits", async () => {
    const app = await useApp();
    const id = await submitOk(app, { prompt: "mine" });
    const cases: Array<[string, string, Record<string, string>, number, string]> = [
      ["task_AAAAAAAAAAAAAAAAAAAAAA", "", auth(app.key), 404, "task_not_found"],
      ["not-a-task", "", auth(app.key), 404, "task_not_found"],
      [id, "", auth(TEST_KEYS.other), 404, "task_not_found"],
      [id, "", {}, 401, "missing_api_key"],
      [id, "", auth("sk-wrong"), 401, "invalid_api_key"],
      [id, "?wait=61", auth(app.key), 400, "invalid_value"],
      [id, "?wait=abc", auth(app.key), 400, "invalid_value"],
      [id, "?wait=1&wait=2", auth(app.key), 400, "invalid_value"],
    ];
    for (const [task, query, headers, status, code] of cases) {
      const { lane, router } = await bothWays(app, task, query, headers);
      expect(lane, `${task}${query}`).toEqual(router);
      expect(lane.status).toBe(status);
      expect((lane.body as { error: { code: string } }).error.code).toBe(code);
    }
  });

  it("reads the origin of image URLs as the router does, trusted proxy headers included", async () => {
    const app = await useApp({
      config: { server: { port: 0, host: "127.0.0.1", trustProxy: true } },
    });
    const id = await submitOk(app, { prompt: "where", response_format: "url" });
    await waitForStatus(app, id, ["completed"]);
    const forwarded = {
      ...auth(app.key),
      host: "internal:8080",
      "x-forwarded-host": "images.example.com, proxy.internal",
      "x-forwarded-proto": "https",
    };
    const { lane, router } = await bothWays(app, id, "", forwarded);
    expect(lane).toEqual(router);
    expect(lane.body).toMatchObject({
      data: [
        { url: expect.stringMatching(/^https:\/\/images\.example\.com\/v1\/images\/files\//) },
      ],
    });
    const poisoned = await bothWays(app, id, "", { ...auth(app.key), host: "a@evil.example" });
    expect(poisoned.lane).toEqual(poisoned.router);
    expect(poisoned.lane.status).toBe(400);
  });

  it("waits with ?wait=N and answers the moment the task finishes", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "ok", delayMs: 600 });
    const id = await submitOk(app, { prompt: "soon" });
    const started = Date.now();
    const answer = shown(await get(app, `/v1/images/tasks/${id}?wait=10`, auth(app.key)));
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ id, status: "completed" });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("answers HEAD (Express's route) and conditional requests as plain polls", async () => {
    const app = await useApp();
    const id = await submitOk(app, { prompt: "head" });
    const head = await send(app, "HEAD", `/v1/images/tasks/${id}`, auth(app.key));
    expect(head.status).toBe(200);
    expect(head.text).toBe("");
    expect(head.headers["cache-control"]).toBe("no-store");
    const conditional = await get(app, `/v1/images/tasks/${id}`, {
      ...auth(app.key),
      "if-none-match": "*",
    });
    expect(conditional.status).toBe(200);
    expect(JSON.parse(conditional.text)).toMatchObject({ id });
  });
});

describe("submissions on the task lane", () => {
  /** The task fields that differ between two submissions of one body. */
  const comparable = (answer: ReturnType<typeof shown>) => {
    const body = answer.body as Record<string, unknown>;
    const id = String(body.id);
    const masked = JSON.parse(
      JSON.stringify(body, (key, value: unknown) =>
        ["created", "started_at", "completed_at", "expires_at"].includes(key)
          ? typeof value
          : value,
      )
        .replaceAll(id, "<id>")
        .replace(/expires=\d+&signature=[\w-]+/g, "<signed>"),
    ) as unknown;
    return {
      ...answer,
      body: masked,
      location: String(answer.location).replace(id, "<id>"),
      "content-length": undefined,
    };
  };

  it("answers submissions, their refusals and Prefer: wait as Express's route does", async () => {
    const app = await useApp();
    const json = { ...auth(app.key), "content-type": "application/json" };
    const body = (fields: Record<string, unknown>) =>
      JSON.stringify({ model: "gpt-image-1", ...fields });
    const cases: Array<[string, Record<string, string>, string | undefined, number]> = [
      ["plain", json, body({ prompt: "a fox" }), 202],
      ["waited", { ...json, prefer: "wait=10" }, body({ prompt: "a fox" }), 200],
      ["url", { ...json, prefer: "wait=10" }, body({ prompt: "u", response_format: "url" }), 200],
      ["no key", { "content-type": "application/json" }, body({ prompt: "a fox" }), 401],
      ["bad json", json, "{", 400],
      ["no body", json, undefined, 400],
      ["unknown field", json, body({ prompt: "p", colour: "red" }), 400],
      ["missing prompt", json, body({}), 400],
      ["chat model", json, body({ prompt: "p", model: "gpt-4o-mini" }), 400],
      ["long key", { ...json, "idempotency-key": "k".repeat(256) }, body({ prompt: "p" }), 400],
      ["too large", json, body({ prompt: "p".repeat(2 * 1024 * 1024) }), 413],
    ];
    for (const [name, headers, payload, status] of cases) {
      const lane = shown(await send(app, "POST", "/v1/images/tasks", headers, payload));
      const router = shown(await send(app, "POST", "/v1/images/tasks/", headers, payload));
      expect(lane.status, name).toBe(status);
      expect(comparable(lane), name).toEqual(comparable(router));
    }
  });

  it("replays an Idempotency-Key across the lane and Express's route", async () => {
    const app = await useApp();
    app.upstream.behave("images", { kind: "hang" });
    const headers = {
      ...auth(app.key),
      "content-type": "application/json",
      "idempotency-key": "lane-key-1",
    };
    const payload = JSON.stringify({ model: "gpt-image-1", prompt: "once" });
    const first = await send(app, "POST", "/v1/images/tasks", headers, payload);
    const again = await send(app, "POST", "/v1/images/tasks/", headers, payload);
    const third = await send(app, "POST", "/v1/images/tasks", headers, payload);
    expect(first.status).toBe(202);
    const id = (JSON.parse(first.text) as { id: string }).id;
    for (const replay of [again, third]) {
      expect(replay.headers["idempotent-replayed"]).toBe("true");
      expect((JSON.parse(replay.text) as { id: string }).id).toBe(id);
    }
    expect(shown(again)).toEqual(shown(third));
  });
});
