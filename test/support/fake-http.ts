import type { IncomingMessage, ServerResponse } from "node:http";

/** An OpenAI error envelope. */
export function errorEnvelope(message: string, type: string, code: string | null): unknown {
  return { error: { message, type, param: null, code } };
}

/** The whole body of a request. */
export async function readRaw(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** Answers `status` with `body` as JSON, with its Content-Length. */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(payload),
  });
  res.end(payload);
}

/** Resolves after `ms`, or early with `false` when the client goes away. */
export function pause(res: ServerResponse, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    if (res.destroyed) return resolve(false);
    const timer = setTimeout(() => {
      res.off("close", onClose);
      resolve(true);
    }, ms);
    const onClose = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    res.once("close", onClose);
  });
}

/** Unix seconds. */
export const now = () => Math.floor(Date.now() / 1000);
