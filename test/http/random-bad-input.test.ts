import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { captureLines } from "../logging/capture-lines.js";
import { startTestApp, TEST_KEYS, UPSTREAM_KEY } from "../support/start-test-app.js";
import { slow } from "../support/time-factor.js";
import { expectNothingLeaked } from "./error-envelope.js";

/*
 * Random bad input, as careless clients and scanners send it: every route, wrong methods,
 * broken and odd JSON, wrong types in every field the routes read, forms that are not forms,
 * odd `Prefer` and `Idempotency-Key` headers, missing or wrong keys. Whatever comes in, the
 * answer is never a 5xx, a 4xx is the OpenAI error envelope, nothing secret is echoed, the
 * service logs no error and still answers afterwards. Seeded: a failure names its seed and
 * request, and replays; `TEST_RANDOM_SEED` runs another mix.
 */

const SEED = Number(process.env.TEST_RANDOM_SEED) || 20261206;
const REQUESTS = 600;

/** mulberry32: a small seeded generator, so that a failing request can be replayed. */
function generator(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const POSTS = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/embeddings",
  "/v1/moderations",
  "/v1/responses",
  "/v1/responses/resp_abc/cancel",
  "/v1/images/generations",
  "/v1/images/edits",
  "/v1/images/variations",
  "/v1/images/tasks",
  "/v1/images/tasks/imgtask_abc/cancel",
  "/v1/images/edits/tasks",
  "/v1/images/generations/async",
  "/v1/images/edits/async",
  "/v1/async/images/generations",
  "/v1/async/images/edits",
  "/v1/audio/speech",
  "/v1/audio/transcriptions",
];
/** The routes that read forms: passed through (spooled), or read as a task's edit. */
const FORM_ROUTES = [
  "/v1/images/edits",
  "/v1/images/variations",
  "/v1/audio/transcriptions",
  "/v1/images/edits/tasks",
  "/v1/images/edits/async",
  "/v1/async/images/edits",
];
const GETS = [
  "/v1/models",
  "/v1/models/gpt-image-1",
  "/v1/responses/resp_abc",
  "/v1/responses/resp_abc/input_items",
  "/v1/images/tasks",
  "/v1/images/tasks?limit=abc&order=sideways",
  "/v1/images/tasks?limit=-1&after=%ff",
  "/v1/images/tasks/imgtask_abc",
  "/v1/images/tasks/imgtask_abc/events",
  "/v1/images/files/imgtask_abc/0.png",
  "/v1/async/images/generations/job_1",
  "/v1/%2e%2e/models",
  "/v1//chat/completions",
  "/v1/images/tasks/%00",
];
const FIELDS = [
  "model",
  "prompt",
  "n",
  "size",
  "quality",
  "response_format",
  "background",
  "stream",
  "input",
  "messages",
  "webhook_url",
  "metadata",
  "partial_images",
  "output_format",
  "output_compression",
  "moderation",
  "user",
  "image",
  "mask",
  "tools",
  "previous_response_id",
  "max_output_tokens",
  "__proto__",
  "constructor",
];
const MODELS = ["gpt-image-1", "gpt-image-1", "gpt-4o-mini", "", null, 5, ["gpt-image-1"], {}];
/** A 1x1 PNG, and other bytes sent as files. */
const FILES = [
  Buffer.from(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
    "base64",
  ),
  Buffer.from("GIF89a...."),
  Buffer.alloc(0),
  Buffer.alloc(64 * 1024, 1),
];
const TYPES = ["image/png", "application/octet-stream", "", "text/html"];
const NAMES = ["a.png", "", "../../etc/passwd", 'a"b.png', "é.png"];
const VALUES = [null, true, 0, -1, 1e308, 1.5, "", "a", "x".repeat(5000), [], {}, [null], "\ud800"];

function requestMaker(random: () => number) {
  const pick = <T>(from: readonly T[]): T => from[Math.floor(random() * from.length)]!;
  const value = (depth: number): unknown =>
    depth < 3 && random() < 0.25 ? fields(depth + 1) : pick(VALUES);
  function fields(depth = 0): Record<string, unknown> {
    const body: Record<string, unknown> = {};
    for (let n = 1 + Math.floor(random() * 5); n > 0; n -= 1) body[pick(FIELDS)] = value(depth);
    if (random() < 0.9) body.model = pick(MODELS);
    if (random() < 0.6) body.prompt = pick(["a cat", "", 5, null, "x".repeat(40_000)]);
    if (random() < 0.3)
      body.messages = pick([[{ role: "user", content: "hi" }], [], [{ role: 5 }]]);
    if (random() < 0.3) body.input = pick(["hi", [], 5, [{ type: "image_generation_call" }]]);
    if (random() < 0.2) body.tools = pick([[{ type: "image_generation" }], "x", [null]]);
    if (random() < 0.2) body.background = pick([true, "true", 1]);
    if (random() < 0.2) body.stream = pick([true, "yes"]);
    if (random() < 0.1) body.webhook_url = pick(["http://127.0.0.1/x", "ftp://x", ""]);
    return body;
  }
  /** A form as fetch sends one (its own boundary), with odd names, values and files. */
  function form(): FormData {
    const data = new FormData();
    if (random() < 0.8) data.append("model", String(pick(MODELS)));
    for (let n = Math.floor(random() * 6); n > 0; n -= 1) {
      const name = pick(["", "", "image", "image[]", "mask", "file", "x".repeat(300), ...FIELDS]);
      if (random() < 0.5) data.append(name, String(pick(VALUES)));
      else data.append(name, new Blob([pick(FILES)], { type: pick(TYPES) }), pick(NAMES));
    }
    return data;
  }
  const bodies: Array<() => [string, string]> = [
    () => ["{", "application/json"],
    () => ["null", "application/json"],
    () => ['[1,"2"]', "application/json"],
    () => ["", "application/json"],
    () => ["[".repeat(10_000), "application/json"],
    () => [`${JSON.stringify({ model: "gpt-image-1", prompt: "a" })}x`, "application/json"],
    () => [JSON.stringify(fields()), "text/plain"],
    () => ["not a form", "multipart/form-data"],
    () => [
      '--b\r\nContent-Disposition: form-data; name="model"\r\n\r\ngpt-image-1\r\n--b',
      "multipart/form-data; boundary=b",
    ],
  ];
  return () => {
    if (random() < 0.25) {
      const path = pick(FORM_ROUTES);
      return { method: "POST", path, headers: headers(), body: form() as FormData | string };
    }
    const get = random() < 0.35;
    const path = pick(get ? GETS : POSTS);
    const method =
      random() < 0.85 ? (get ? "GET" : "POST") : pick(["PUT", "PATCH", "DELETE", "OPTIONS"]);
    const [body, type] =
      random() < 0.5 ? pick(bodies)() : [JSON.stringify(fields()), "application/json"];
    return {
      method,
      path,
      headers: { ...headers(), "content-type": type },
      body: method === "GET" ? undefined : body,
    };
  };
  /** The key (or a wrong one, or none) and the optional headers. */
  function headers(): Record<string, string> {
    const set: Record<string, string> = {};
    const auth = random();
    if (auth < 0.85) set.authorization = `Bearer ${pick(Object.values(TEST_KEYS))}`;
    else if (auth < 0.92) set.authorization = pick(["Bearer ", "Basic abc", "Bearer sk-nope"]);
    if (random() < 0.3) set.prefer = pick(["wait=1", "wait=abc", "wait=-1", "wait=1e99"]);
    if (random() < 0.15) set["idempotency-key"] = pick(["", "k".repeat(500), "a b", "é"]);
    return set;
  }
}

describe("random bad input", () => {
  it(`is a 4xx in the error envelope, never a 5xx, a leak or a logged error (seed ${SEED})`, async () => {
    const log = captureLines();
    const app = await startTestApp({ logger: pino({ level: "info" }, log.stream) });
    onTestFinished(() => app.close());
    const next = requestMaker(generator(SEED));
    const seen = new Map<number, number>();
    for (let n = 0; n < REQUESTS; n += 1) {
      const request = next();
      const response = await fetch(app.url + request.path, {
        ...request,
        signal: AbortSignal.timeout(slow(20_000)),
      });
      const text = await response.text();
      const what = `request ${n}: ${request.method} ${request.path} ${JSON.stringify(request.headers)} ${typeof request.body === "string" ? request.body.slice(0, 200) : "(a form)"} -> ${response.status} ${text.slice(0, 300)}`;
      seen.set(response.status, (seen.get(response.status) ?? 0) + 1);
      expect(response.status, what).toBeLessThan(500);
      expectNothingLeaked(text);
      if (response.status >= 400) {
        expect(response.headers.get("content-type"), what).toMatch(/^application\/json/);
        const body = JSON.parse(text) as { error?: { message?: unknown; type?: unknown } };
        expect(typeof body.error?.message, what).toBe("string");
        expect(typeof body.error?.type, what).toBe("string");
      }
    }
    // The mix reached the routes' own checks, not only the key and the route table.
    for (const status of [200, 400, 401, 404])
      expect(seen.get(status), `${status}s`).toBeGreaterThan(20);
    expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
    const lines = log.lines.join("\n");
    expect(lines).not.toContain(UPSTREAM_KEY);
    for (const key of Object.values(TEST_KEYS)) expect(lines).not.toContain(key);
    expect(log.lines.filter((line) => (JSON.parse(line) as { level: number }).level >= 50)).toEqual(
      [],
    );
  });
});
