import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * Lets web pages of other origins call the API from a browser, as OpenAI's
 * API and the gateways behind the service (new-api, one-api, LiteLLM) let
 * them. Safe to allow any origin: the API authenticates by bearer header
 * only and sets no cookie, so a page can use only a key it already has.
 * Returns true when it answered the request itself (a preflight).
 */
export type Cors = (req: IncomingMessage, res: ServerResponse, path: string) => boolean;

/** What a preflight may ask for: every method an API route takes. */
const ALLOWED_METHODS = "GET, POST, DELETE, OPTIONS";
/** How long a browser may keep a preflight's answer (Chromium caps it at 2 hours). */
const MAX_AGE_SEC = "7200";
/** A header list as a preflight sends it: tokens and commas only. */
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:\s*,\s*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/;

/**
 * The CORS of `origins` (`server.corsOrigins`): `*` for any origin, else the
 * origins listed (each answered with itself, and `Vary: Origin`); none, no
 * CORS at all (undefined). Only the API's routes (`/v1/…` and `/mcp`) take
 * part, and only requests that carry `Origin`: a server's SDK, which sends
 * none, meets no CORS header and pays for none.
 */
export function createCors(origins: readonly string[]): Cors | undefined {
  if (origins.length === 0) return undefined;
  const any = origins.includes("*");
  const listed = new Set(origins.map((origin) => origin.toLowerCase()));
  return (req, res, path) => {
    const origin = req.headers.origin;
    if (origin === undefined || !isApiPath(path)) return false;
    if (!any && !listed.has(origin.toLowerCase())) return false;
    res.setHeader("Access-Control-Allow-Origin", any ? "*" : origin);
    if (!any) res.setHeader("Vary", "Origin");
    const asked = req.headers["access-control-request-method"];
    if (req.method !== "OPTIONS" || asked === undefined) {
      // Every header of the answer readable: rate limits, request ids, `Location`, MCP's session.
      res.setHeader("Access-Control-Expose-Headers", "*");
      return false;
    }
    answerPreflight(req, res);
    return true;
  };
}

/**
 * A preflight: 204 with what the page may send. The headers asked for are
 * allowed as asked (the SDKs send their own `x-stainless-*`, `openai-beta`,
 * `idempotency-key` and `prefer`; `Authorization` must be named, as `*` does
 * not cover it).
 */
function answerPreflight(req: IncomingMessage, res: ServerResponse): void {
  res.statusCode = 204;
  res.setHeader("Access-Control-Allow-Methods", ALLOWED_METHODS);
  const headers = req.headers["access-control-request-headers"]?.trim();
  if (headers !== undefined && HEADER_LIST.test(headers)) {
    res.setHeader("Access-Control-Allow-Headers", headers);
  }
  res.setHeader("Access-Control-Max-Age", MAX_AGE_SEC);
  res.end();
}

/** `/v1`, `/v1/…` and `/mcp`, in any case, as the routes match. */
function isApiPath(path: string): boolean {
  const head = path.slice(0, 4).toLowerCase();
  return head === "/v1" || head === "/v1/" || (head === "/mcp" && path.length === 4);
}
