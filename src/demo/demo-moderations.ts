import { createHash } from "node:crypto";
import { demoId } from "./demo-chat-reply.js";
import {
  DemoRequestError,
  invalidParam,
  isJsonObject,
  missingParam,
  readObjectBody,
  sendJson,
} from "./demo-http-helpers.js";
import { DEMO_FAIL_PREFIX } from "./demo-images.js";
import type { DemoHandler } from "./demo-route.js";

/** The categories of omni-moderation, and whether images are checked for each. */
const CATEGORIES: ReadonlyArray<readonly [name: string, images: boolean]> = [
  ["harassment", false],
  ["harassment/threatening", false],
  ["hate", false],
  ["hate/threatening", false],
  ["illicit", false],
  ["illicit/violent", false],
  ["self-harm", true],
  ["self-harm/instructions", true],
  ["self-harm/intent", true],
  ["sexual", true],
  ["sexual/minors", false],
  ["violence", true],
  ["violence/graphic", true],
];
/** The category a flagged demo input lands in. */
const FLAGGED_CATEGORY = "violence";

/** What one moderation result looks at: its texts, and whether images came with them. */
interface Subject {
  texts: string[];
  images: boolean;
}

/**
 * `POST /v1/moderations`: one result per input (a multimodal list is one input). Nothing is
 * judged: a text starting with `!fail` is flagged as violence, as it fails an image task, and
 * every score is small and derived from the text, so results are stable per input.
 */
export const handleModerations: DemoHandler = async (req, res) => {
  const { value: body } = await readObjectBody(req);
  const model = typeof body.model === "string" ? body.model : "omni-moderation-latest";
  const results = parseSubjects(body.input).map(moderate);
  sendJson(res, 200, { id: demoId("modr-demo"), model, results });
};

function moderate(subject: Subject): Record<string, unknown> {
  const flagged = subject.texts.some((text) => text.trimStart().startsWith(DEMO_FAIL_PREFIX));
  const seed = createHash("sha256").update(subject.texts.join("\u0000")).digest();
  const categories: Record<string, boolean> = {};
  const scores: Record<string, number> = {};
  const applied: Record<string, string[]> = {};
  CATEGORIES.forEach(([name, images], i) => {
    const hit = flagged && name === FLAGGED_CATEGORY;
    categories[name] = hit;
    // Tiny, like a harmless text's scores: 1e-6 to 1e-4.
    scores[name] = hit ? 0.97 : Number((((seed[i] ?? 0) + 1) * 4e-7).toPrecision(3));
    applied[name] = subject.images && images ? ["text", "image"] : ["text"];
  });
  return {
    flagged,
    categories,
    category_scores: scores,
    category_applied_input_types: applied,
  };
}

/** `input`: a text, a list of texts, or a list of `{type: "text" | "image_url"}` parts. */
function parseSubjects(input: unknown): Subject[] {
  if (input === undefined || input === null) throw new DemoRequestError(400, missingParam("input"));
  if (typeof input === "string") return [{ texts: [input], images: false }];
  if (Array.isArray(input) && input.length > 0) {
    if (input.every((item) => typeof item === "string")) {
      return input.map((text: string) => ({ texts: [text], images: false }));
    }
    if (input.every((item) => isJsonObject(item))) {
      const parts = input as Array<Record<string, unknown>>;
      return [
        {
          texts: parts.filter((p) => p.type === "text").map((p) => String(p.text ?? "")),
          images: parts.some((p) => p.type === "image_url"),
        },
      ];
    }
  }
  throw new DemoRequestError(
    400,
    invalidParam("input", "'input' must be a string, a list of strings, or a list of parts."),
  );
}
