import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One request a receiver got. */
export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** `Date.now()` when the body was complete. */
  receivedAt: number;
}

/** How the receiver answers its n-th request (n from 1); it may also never answer. */
export type Responder = (res: ServerResponse, request: ReceivedRequest, n: number) => void;

/** A real HTTP webhook receiver on 127.0.0.1, port 0, answering as the test scripts it. */
export interface WebhookReceiver {
  /** `http://127.0.0.1:<port>` */
  url: string;
  port: number;
  /** Every request, in order of arrival (body complete). */
  requests: ReceivedRequest[];
  /** Resolves once `count` requests have arrived. */
  received(count: number): Promise<void>;
  respond: Responder;
  close(): Promise<void>;
}

/**
 * Starts a receiver; by default it answers 200 `ok`. `port` brings one back
 * where an earlier one was (a receiver that was down comes up again).
 */
export async function startWebhookReceiver(
  respond: Responder = (res) => res.end("ok"),
  options: { port?: number } = {},
): Promise<WebhookReceiver> {
  const requests: ReceivedRequest[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const request: ReceivedRequest = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        receivedAt: Date.now(),
      };
      requests.push(request);
      receiver.respond(res, request, requests.length);
      for (const waiter of waiters.filter((w) => requests.length >= w.count)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    });
  });
  server.listen(options.port ?? 0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  const receiver: WebhookReceiver = {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    respond,
    received(count) {
      if (requests.length >= count) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ count, resolve }));
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return receiver;
}

/** Headers as the `standardwebhooks` verifier takes them. */
export function headerRecord(headers: IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, String(value)]));
}
