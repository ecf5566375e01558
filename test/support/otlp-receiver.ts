import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { gunzip, inflate } from "node:zlib";
import { decodeTraceRequest } from "./otlp/decode-trace-request.js";
import { flattenSpans, type ReceivedSpan } from "./otlp/flatten-spans.js";
import type { OtlpTraceRequest } from "./otlp/otlp-json.js";

export {
  OTLP_SPAN_KIND,
  OTLP_STATUS_CODE,
  type AttributeValue,
  type Attributes,
  type ReceivedSpan,
} from "./otlp/flatten-spans.js";

/** One export request the receiver answered (or refused). */
export interface ReceivedRequest {
  method: string;
  path: string;
  /** `Content-Type` without parameters, lower-case. */
  contentType: string;
  /** `Content-Encoding`, or `identity` when none. */
  contentEncoding: string;
  headers: IncomingHttpHeaders;
  /** The answer's status: 200, or 400/404/413/415 for a request it refused. */
  status: number;
  /** Spans in the request (0 when refused). */
  spanCount: number;
}

/** An OTLP/HTTP trace receiver for tests; see {@link startOtlpReceiver}. */
export interface OtlpReceiver {
  /** Base URL (`http://127.0.0.1:PORT`): `OTEL_EXPORTER_OTLP_ENDPOINT`; traces go to `${url}/v1/traces`. */
  url: string;
  /** Every span received so far, in arrival order. */
  spans(): ReceivedSpan[];
  /**
   * Resolves every span received once `predicate(spans)` holds (checked at
   * once and after each request); rejects after `timeoutMs` (default 5000)
   * naming the spans it had.
   */
  waitForSpans(
    predicate: (spans: ReceivedSpan[]) => boolean,
    timeoutMs?: number,
  ): Promise<ReceivedSpan[]>;
  /** Every request, in arrival order. */
  requests: ReceivedRequest[];
  /** Stops listening and drops open connections; safe to call twice. */
  close(): Promise<void>;
}

/** Bodies past this are refused (413): an exporter's batch is far smaller. */
const MAX_BODY_BYTES = 32 * 1024 * 1024;

const decompress = { gzip: promisify(gunzip), deflate: promisify(inflate) };

/**
 * Listens on a free port of 127.0.0.1 for `POST /v1/traces` in OTLP/HTTP:
 * `application/x-protobuf` (ExportTraceServiceRequest) or `application/json`
 * (OTLP/JSON, hex ids), optionally gzip- or deflate-encoded; answers 200 with
 * an empty ExportTraceServiceResponse in the request's encoding. Anything
 * else is refused as an OTLP collector would: 404 (another path), 405 (another
 * method), 415 (another type or encoding), 400 (a body that does not decode).
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: ReceivedRequest[] = [];
  const listeners = new Set<() => void>();
  const server = createServer((req, res) => {
    void handle(req, res, (request, received) => {
      requests.push(request);
      spans.push(...received);
      for (const listener of [...listeners]) listener();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => [...spans],
    requests,
    waitForSpans: (predicate, timeoutMs = 5_000) =>
      waitFor(predicate, timeoutMs, () => [...spans], listeners),
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      })),
  };
}

function waitFor(
  predicate: (spans: ReceivedSpan[]) => boolean,
  timeoutMs: number,
  current: () => ReceivedSpan[],
  listeners: Set<() => void>,
): Promise<ReceivedSpan[]> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const spans = current();
      if (!predicate(spans)) return false;
      clearTimeout(timer);
      listeners.delete(onRequest);
      resolve(spans);
      return true;
    };
    const onRequest = () => void check();
    const timer = setTimeout(() => {
      listeners.delete(onRequest);
      const names = current().map((span) => span.name);
      reject(
        new Error(
          `waitForSpans: not satisfied after ${timeoutMs} ms; received ${names.length} spans: ${JSON.stringify(names)}`,
        ),
      );
    }, timeoutMs);
    listeners.add(onRequest);
    check();
  });
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  record: (request: ReceivedRequest, spans: ReceivedSpan[]) => void,
): Promise<void> {
  const contentType = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  const contentEncoding = (req.headers["content-encoding"] ?? "identity").trim().toLowerCase();
  const request: ReceivedRequest = {
    method: req.method ?? "",
    path: (req.url ?? "").split("?")[0]!,
    contentType,
    contentEncoding,
    headers: req.headers,
    status: 200,
    spanCount: 0,
  };
  const refuse = (status: number, message: string) => {
    request.status = status;
    record(request, []);
    res.writeHead(status, { "content-type": "text/plain" }).end(message);
  };
  if (request.path !== "/v1/traces") return refuse(404, "only /v1/traces is served");
  if (request.method !== "POST") return refuse(405, "POST only");
  const isJson = contentType === "application/json";
  if (!isJson && contentType !== "application/x-protobuf") {
    return refuse(415, `unsupported content type ${JSON.stringify(contentType)}`);
  }
  if (contentEncoding !== "identity" && !(contentEncoding in decompress)) {
    return refuse(415, `unsupported content encoding ${JSON.stringify(contentEncoding)}`);
  }
  let spans: ReceivedSpan[];
  try {
    const raw = await readBody(req);
    if (raw === undefined) return refuse(413, "body too large");
    const body =
      contentEncoding === "identity"
        ? raw
        : await decompress[contentEncoding as keyof typeof decompress](raw);
    const decoded = isJson
      ? (JSON.parse(body.toString("utf8")) as OtlpTraceRequest)
      : decodeTraceRequest(body);
    spans = flattenSpans(decoded);
  } catch (err) {
    return refuse(400, `cannot decode the body: ${(err as Error).message}`);
  }
  request.spanCount = spans.length;
  record(request, spans);
  // An empty ExportTraceServiceResponse: `{}` in JSON, no bytes in protobuf.
  res.writeHead(200, { "content-type": contentType }).end(isJson ? "{}" : "");
}

/** The whole body, or undefined past {@link MAX_BODY_BYTES}. */
async function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
