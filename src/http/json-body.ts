import type { IncomingMessage } from "node:http";
import express, { type RequestHandler } from "express";

const rawBodies = new WeakMap<IncomingMessage, Buffer>();

/**
 * Parses any request body as JSON (whatever its Content-Type, as OpenAI
 * does), up to `limit` bytes, and keeps the raw bytes so the passthrough can
 * send the client's exact body on.
 */
export function createJsonBody(limit: number): RequestHandler {
  const parse = express.json({
    limit,
    type: () => true,
    // Any JSON parses; a body that is not an object is then `invalid_value`, not "not JSON".
    strict: false,
    verify: (req, _res, buf) => {
      rawBodies.set(req, buf);
    },
  });
  return (req, res, next) => {
    parse(req, res, (err?: unknown) => {
      // body-parser makes an empty body `{}`; an empty body is no JSON at all.
      if (!err && !rawBodies.get(req)?.length) req.body = undefined;
      next(err);
    });
  };
}

/** The bytes {@link createJsonBody} parsed, if it parsed any. */
export function getRawBody(req: IncomingMessage): Buffer | undefined {
  return rawBodies.get(req);
}
