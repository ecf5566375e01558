import { randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";
import { encodePng } from "../../src/demo/png-encoder.js";
import type { FakeRoute, RecordedForm } from "./fake-upstream-types.js";
import { errorEnvelope, now, pause, sendJson } from "./fake-http.js";
import { wordsOf } from "./fake-conversations.js";

/** A 4x4 PNG, shared by every image answer. */
export const TINY_PNG_B64 = encodePng({
  width: 4,
  height: 4,
  channels: 3,
  pixels: Uint8Array.from({ length: 48 }, (_, i) => (i * 53) & 0xff),
}).toString("base64");

/** The "audio" the speech route answers: 48 KiB of a known pattern. */
export const FAKE_SPEECH = Buffer.from(Array.from({ length: 48 * 1024 }, (_, i) => (i * 7) & 0xff));

/**
 * The fake channel's answers on its other routes: images, embeddings,
 * completions, moderations, speech, transcriptions and its model list.
 */
export function createOtherAnswers(options: { name: string; models: readonly string[] }) {
  const { name, models } = options;
  const text = wordsOf(name).join("");

  const answerImages = (res: ServerResponse, body: Record<string, unknown>): void => {
    const requested = Number(body.n);
    const n = Number.isFinite(requested) ? Math.min(10, Math.max(1, Math.floor(requested))) : 1;
    sendJson(res, 200, {
      created: now(),
      data: Array.from({ length: n }, () => ({ b64_json: TINY_PNG_B64 })),
      usage: {
        input_tokens: 10,
        input_tokens_details: { text_tokens: 10, image_tokens: 0 },
        output_tokens: 100 * n,
        total_tokens: 10 + 100 * n,
      },
    });
  };

  const answerEmbeddings = (res: ServerResponse, body: Record<string, unknown>): void => {
    const inputs = Array.isArray(body.input) ? body.input : [body.input];
    const vector = [0.25, -0.5, 0.125];
    sendJson(res, 200, {
      object: "list",
      data: inputs.map((_, index) => ({
        object: "embedding",
        index,
        embedding:
          body.encoding_format === "base64"
            ? Buffer.from(new Float32Array(vector).buffer).toString("base64")
            : vector,
      })),
      model: body.model,
      usage: { prompt_tokens: 3 * inputs.length, total_tokens: 3 * inputs.length },
    });
  };

  const answerCompletions = (res: ServerResponse, body: Record<string, unknown>): void => {
    sendJson(res, 200, {
      id: `cmpl-fake${randomBytes(6).toString("hex")}`,
      object: "text_completion",
      created: now(),
      model: body.model,
      choices: [{ text, index: 0, logprobs: null, finish_reason: "stop" }],
      usage: { prompt_tokens: 2, completion_tokens: 4, total_tokens: 6 },
    });
  };

  const answerModerations = (res: ServerResponse, body: Record<string, unknown>): void => {
    sendJson(res, 200, {
      id: `modr-fake${randomBytes(6).toString("hex")}`,
      model: body.model,
      results: [
        {
          flagged: false,
          categories: { violence: false, hate: false },
          category_scores: { violence: 0.001, hate: 0.0001 },
        },
      ],
    });
  };

  const answerSpeech = async (res: ServerResponse): Promise<void> => {
    res.writeHead(200, { "content-type": "audio/mpeg", "content-length": FAKE_SPEECH.length });
    // In pieces, as a synthesiser streams its audio.
    for (let at = 0; at < FAKE_SPEECH.length; at += 16 * 1024) {
      res.write(FAKE_SPEECH.subarray(at, at + 16 * 1024));
      if (!(await pause(res, 5))) return;
    }
    res.end();
  };

  const answerTranscription = (
    res: ServerResponse,
    route: FakeRoute,
    form: RecordedForm | undefined,
  ): void => {
    const said = `${route === "translations" ? "translated" : "transcribed"} by ${name}`;
    if (form?.fields.response_format === "text") {
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
      res.end(said);
      return;
    }
    sendJson(res, 200, {
      text: said,
      ...(route === "transcriptions"
        ? { usage: { type: "tokens", input_tokens: 11, output_tokens: 3, total_tokens: 14 } }
        : {}),
    });
  };

  const answerModels = (res: ServerResponse, pathname: string): void => {
    const model = (id: string): unknown => ({
      id,
      object: "model",
      created: 1_700_000_000,
      owned_by: name,
    });
    const one = /^\/v1\/models\/([^/]+)$/.exec(pathname);
    if (!one) {
      sendJson(res, 200, { object: "list", data: models.map(model) });
      return;
    }
    const id = decodeURIComponent(one[1]!);
    if (models.includes(id)) sendJson(res, 200, model(id));
    else
      sendJson(
        res,
        404,
        errorEnvelope(
          `The model '${id}' does not exist`,
          "invalid_request_error",
          "model_not_found",
        ),
      );
  };

  return {
    answerImages,
    answerEmbeddings,
    answerCompletions,
    answerModerations,
    answerSpeech,
    answerTranscription,
    answerModels,
  };
}
