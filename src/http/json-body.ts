import type { IncomingMessage } from "node:http";
import { MAX_JSON_DEPTH, parseJson, type ParsedJson } from "./inspect-json.js";
import { readRequestBody, type ReadBodyOptions } from "./read-body.js";

/** Limits of a JSON route. */
export interface JsonBodyOptions extends ReadBodyOptions {
  /** Deepest nesting accepted. Default {@link MAX_JSON_DEPTH}. */
  maxDepth?: number;
}

/**
 * Reads and parses a JSON body, whatever its Content-Type (as OpenAI does).
 * `undefined` for an empty body: there is nothing to parse.
 * @throws ServiceError `request_too_large`, `request_timeout`, `invalid_json`, `invalid_value`
 */
export async function readJsonBody(
  req: IncomingMessage,
  options: JsonBodyOptions,
): Promise<ParsedJson | undefined> {
  const body = await readRequestBody(req, options);
  if (body.length === 0) return undefined;
  return parseJson(body, options.maxDepth ?? MAX_JSON_DEPTH);
}
