import { estimateTokens } from "./demo-chat-reply.js";
import {
  DemoRequestError,
  invalidParam,
  missingParam,
  oneOf,
  readObjectBody,
  sendJson,
  wholeNumber,
} from "./demo-http-helpers.js";
import type { DemoHandler } from "./demo-route.js";
import { fnv1a } from "./fnv1a.js";

/** OpenAI's limit on inputs in one request. */
const MAX_INPUTS = 2048;
/** Dimensions each hashed word touches; a few spread words apart without costing much. */
const SLOTS_PER_WORD = 4;

/** `text-embedding-3-large` has 3072 dimensions; the small one and ada-002 have 1536. */
export function nativeDimensions(model: string): number {
  return model.includes("large") ? 3072 : 1536;
}

/**
 * A deterministic unit vector for a text, by feature hashing: every word adds ±1 at a few
 * dimensions picked by its hash. No model is behind it, but the same text always gets the same
 * vector and texts sharing words point the same way, so a demo of similarity search behaves
 * sensibly. Token-id inputs hash their ids the same way.
 */
export function demoEmbedding(input: string | readonly number[], dimensions: number): Float32Array {
  const vector = new Float32Array(dimensions);
  const words =
    typeof input === "string"
      ? (input.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])
      : input.map(String);
  // Text without a word still gets a vector of its own.
  if (words.length === 0) words.push(typeof input === "string" ? `\u0000${input}` : "\u0000");
  for (const word of words) {
    let h = fnv1a(word);
    for (let k = 0; k < SLOTS_PER_WORD; k++) {
      h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> 0;
      h = (h ^ (h >>> 12)) >>> 0;
      const slot = h % dimensions;
      vector[slot] = (vector[slot] ?? 0) + (h & 0x80000000 ? 1 : -1);
    }
  }
  let norm = 0;
  for (const value of vector) norm += value * value;
  norm = Math.sqrt(norm) || 1;
  for (let i = 0; i < dimensions; i++) vector[i] = vector[i]! / norm;
  return vector;
}

/** `POST /v1/embeddings`: one vector per input, as floats or (as the SDK asks) base64. */
export const handleEmbeddings: DemoHandler = async (req, res) => {
  const { value: body } = await readObjectBody(req);
  const model = typeof body.model === "string" ? body.model : "text-embedding-3-small";
  const inputs = parseInputs(body.input);
  const native = nativeDimensions(model);
  const dimensions = wholeNumber(body.dimensions, "dimensions", 1, native, native);
  const format = oneOf(body.encoding_format, "encoding_format", ["float", "base64"], "float");
  let tokens = 0;
  const data = inputs.map((input, index) => {
    tokens += typeof input === "string" ? estimateTokens(input) : input.length;
    const vector = demoEmbedding(input, dimensions);
    return {
      object: "embedding",
      index,
      // Little-endian float32, as OpenAI sends it and the SDK decodes it.
      embedding:
        format === "base64"
          ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString("base64")
          : Array.from(vector),
    };
  });
  sendJson(res, 200, {
    object: "list",
    data,
    model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  });
};

/** `input` as OpenAI takes it: a text, a list of texts, a token list, or a list of those. */
function parseInputs(input: unknown): Array<string | number[]> {
  if (input === undefined || input === null) throw new DemoRequestError(400, missingParam("input"));
  const bad = () =>
    new DemoRequestError(
      400,
      invalidParam(
        "input",
        "'input' must be a non-empty string, a list of them, or a list of token ids (or of such lists).",
      ),
    );
  if (typeof input === "string") {
    if (input.length === 0) throw bad();
    return [input];
  }
  if (!Array.isArray(input) || input.length === 0 || input.length > MAX_INPUTS) throw bad();
  if (input.every(isTokenId)) return [input as number[]];
  return input.map((item: unknown) => {
    if (typeof item === "string" && item.length > 0) return item;
    if (Array.isArray(item) && item.length > 0 && item.every(isTokenId)) return item as number[];
    throw bad();
  });
}

function isTokenId(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}
