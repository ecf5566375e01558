import type { IncomingMessage } from "node:http";
import express, { type RequestHandler } from "express";

const rawBodies = new WeakMap<IncomingMessage, Buffer>();

/**
 * Parses any request body as JSON (whatever its Content-Type, as OpenAI
 * does), up to `limit` bytes, and keeps the raw bytes so the passthrough can
 * send the client's exact body on.
 */
export function createJsonBody(limit: number): RequestHandler {
  return express.json({
    limit,
    type: () => true,
    verify: (req, _res, buf) => {
      rawBodies.set(req, buf);
    },
  });
}

/** The bytes {@link createJsonBody} parsed, if it parsed any. */
export function getRawBody(req: IncomingMessage): Buffer | undefined {
  return rawBodies.get(req);
}
