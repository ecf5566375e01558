import { TINY_PNG_B64 } from "../../support/fake-answers.js";
import { UPSTREAM_KEY } from "../../support/start-test-app.js";

/** A seeded generator in [0, 1). */
export type Rng = () => number;

/**
 * mulberry32, seeded with `seed` and a hash (FNV-1a) of `parts`: each task and route draws from
 * a generator of its own, so a failure replays with the same seed.
 */
export function seeded(seed: number, ...parts: Array<string | number>): Rng {
  let hash = 0x811c9dc5;
  for (const char of parts.join("|")) {
    hash = Math.imul(hash ^ char.charCodeAt(0), 0x01000193);
  }
  let state = (seed ^ hash) | 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[Math.floor(rng() * items.length)]!;
}

/** Stands for {@link DEEP_JSON} in a body until it is sent (no stringify could nest that deep). */
export const DEEP = "__chaos_deep_json__";

/** An object nested 20,000 levels deep: a parser's or a walker's stack, tried. */
export const DEEP_JSON = `${'{"inner":'.repeat(20_000)}{"total_tokens":1}${"}".repeat(20_000)}`;

function nested(): unknown {
  return DEEP;
}

/** JSON that is valid but of no shape a channel should send. */
const ODD_VALUES: unknown[] = [
  null,
  [],
  "a string",
  42,
  true,
  {},
  { data: null },
  { error: null },
  { id: 42, status: { deep: true } },
  { id: { $gt: "" } },
  { id: "../../../etc/passwd?x=#y" },
  { id: "x".repeat(20_000) },
  { id: "" },
  '{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}',
  { usage: nested() },
];

/** Error bodies as channels send them: the envelope, half of it, text, the key echoed. */
const ERRORS: unknown[] = [
  { error: { message: "Rate limited", type: "rate_limit_error", code: "rate_limit_exceeded" } },
  {
    error: {
      message: `Incorrect API key provided: ${UPSTREAM_KEY}`,
      type: "invalid_request_error",
      code: "invalid_api_key",
    },
  },
  { error: { message: `bearer ${UPSTREAM_KEY.slice(3)} refused` } },
  { error: "a string error" },
  { error: { code: 500, message: { nested: "object" } } },
  { error: { code: "content_policy_violation", message: "Your request was rejected." } },
  { message: "no envelope at all" },
  "upstream connect error or disconnect/reset before headers",
  "",
];

/** A body of `kind`: an error answer, a job's, or an event's. */
export function chaosBody(rng: Rng, kind: "error" | "job" | "event"): unknown {
  if (kind === "error") return rng() < 0.8 ? pick(rng, ERRORS) : pick(rng, ODD_VALUES);
  if (kind === "event") {
    return pick(rng, [
      ...ODD_VALUES,
      { type: "image_generation.completed" },
      { type: "image_generation.completed", b64_json: "%%%" },
      {
        type: "image_generation.completed",
        b64_json: Buffer.from("not an image").toString("base64"),
      },
      { type: "image_generation.partial_image", b64_json: 7 },
    ]);
  }
  return pick(rng, ODD_VALUES);
}

/** A generation's answer: `valid` when it holds an image that is one, and no more than asked. */
export interface ImageResult {
  what: string;
  body: unknown;
  valid: boolean;
  /** Sent whole, the task completes with it (its good image kept, any other dropped). */
  completes: boolean;
}

const TEXT_B64 = Buffer.from("hello, not an image").toString("base64");

/**
 * What a generation's answer holds: an image as b64 or url, or nothing that is one. A task that
 * asked for two (`asked`) completes with one good image of two; one that asked for one fails an
 * answer of two.
 */
export function imageResult(rng: Rng, imageBase: string, asked = 1): ImageResult {
  const created = Math.floor(Date.now() / 1000);
  const usage = { input_tokens: 3, output_tokens: 5, total_tokens: 8 };
  const roll = rng();
  if (roll < 0.35) {
    return {
      what: "b64 image",
      body: { created, data: [{ b64_json: TINY_PNG_B64 }], usage },
      valid: true,
      completes: true,
    };
  }
  if (roll < 0.5) {
    return {
      what: "image url",
      body: { created, data: [{ url: `${imageBase}/0.png` }] },
      valid: true,
      completes: false,
    };
  }
  const [what, data] = pick<[string, unknown]>(rng, [
    ["no data", undefined],
    ["data null", null],
    ["empty data", []],
    ["data a string", "data"],
    ["null item", [null]],
    ["empty item", [{}]],
    ["b64 a number", [{ b64_json: 42 }]],
    ["b64 not base64", [{ b64_json: "%%%%%%" }]],
    ["b64 empty", [{ b64_json: "" }]],
    ["b64 of text", [{ b64_json: TEXT_B64 }]],
    ["two images", [{ b64_json: TINY_PNG_B64 }, { b64_json: TINY_PNG_B64 }]],
    ["an image, then text", [{ b64_json: TINY_PNG_B64 }, { b64_json: TEXT_B64 }]],
    ["not base64, then an image", [{ b64_json: "%%%" }, { b64_json: TINY_PNG_B64 }]],
    ["url to metadata", [{ url: "http://169.254.169.254/latest/meta-data/" }]],
    ["url not a url", [{ url: "http://[::1" }]],
    ["url javascript", [{ url: "javascript:alert(1)" }]],
    ["url file", [{ url: "file:///etc/passwd" }]],
    ["usage garbage", [{ b64_json: TINY_PNG_B64, revised_prompt: { no: "string" } }]],
  ]);
  const extra =
    what === "usage garbage"
      ? { usage: pick(rng, ["lots", { total_tokens: -1 }, nested(), [1, 2]]) }
      : {};
  // "usage garbage" still holds one good image: the task may complete with it. Two images, one
  // of them good, are an answer to a task that asked for two.
  const ofTwo = Array.isArray(data) && data.length === 2;
  const valid = what === "usage garbage" || (ofTwo && asked >= 2);
  const body = data === undefined ? { created } : { created, data, ...extra };
  return { what, body, valid, completes: ofTwo && asked >= 2 };
}
