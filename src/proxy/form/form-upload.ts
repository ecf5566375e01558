import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream, rmSync, type WriteStream } from "node:fs";
import type { IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { ChannelBodySource } from "../../channels/channel-client.js";
import { AppError } from "../../http/app-error.js";
import { bodyTooLarge } from "../../http/read-body.js";
import { watchBody, type BodyTiming } from "../../http/watch-body.js";
import { FormScanner, formBoundary } from "./form-scanner.js";

/** What of a form is kept in memory before the rest of the spool goes to a file. */
const SPOOL_MEMORY_BYTES = 256 * 1024;

/** Limits of {@link receiveFormHead}. */
export interface FormUploadOptions extends BodyTiming {
  /** Largest form accepted, in bytes (`server.maxUploadBytes`). */
  maxBytes: number;
  /** Where spool files go. Default the OS temp directory. */
  spoolDir?: string;
}

/**
 * A form being received: its head (up to `model`) spooled, its rest still on
 * the wire. It is the body the channel client streams to a channel.
 */
export interface FormUpload extends ChannelBodySource {
  /** The `model` field, exactly as the channel will read it. */
  readonly model: string;
  /** The client's Content-Type (the boundary), sent on as is. */
  readonly contentType: string;
  /** The client's Content-Length, when it gave one: the channel gets the same bytes. */
  readonly contentLength: number | undefined;
  /**
   * A stream of the whole form for one channel, as the client sent it:
   * the spool, then the rest as it arrives (scanned on the way: a second
   * `model` field, the size limit or the deadline destroy the stream with an
   * AppError). Nothing is taken from the spool or the client before the
   * channel client reads it, which it does once connected.
   */
  open(): Readable;
  /**
   * False once a stream began to take the rest of the form from its client:
   * no other channel can get it then. A form received whole before the first
   * try (`model` came last) can always be sent again.
   */
  canReopen(): boolean;
  /** Removes the spool file. */
  dispose(): void;
}

/**
 * Receives a multipart form up to its `model` field: what comes before is
 * spooled (in memory up to 256 KiB, then to a temporary file), the rest is
 * left on the wire until a channel is connected. The whole form is never in
 * memory. SDKs send `model` before or after the files; either works.
 * @throws AppError `invalid_value` (malformed, ambiguous), `missing_required_parameter`,
 *   `request_too_large`, `request_timeout`
 */
export async function receiveFormHead(
  req: IncomingMessage,
  options: FormUploadOptions,
): Promise<FormUpload> {
  const contentType = String(req.headers["content-type"] ?? "");
  const scanner = new FormScanner(formBoundary(contentType));
  const encoding = req.headers["content-encoding"]?.trim().toLowerCase();
  if (encoding && encoding !== "identity") {
    throw new AppError("invalid_value", "A multipart body must not have a Content-Encoding.");
  }
  const declared = req.headers["content-length"];
  const contentLength = declared === undefined ? undefined : Number(declared);
  if (contentLength !== undefined && contentLength > options.maxBytes) {
    throw bodyTooLarge(options.maxBytes);
  }
  const deadline = performance.now() + options.timeoutMs;
  const memory: Buffer[] = [];
  let memoryBytes = 0;
  let file: { path: string; stream: WriteStream } | undefined;
  let received = 0;
  let ended = false;
  let started = false;
  let disposed = false;
  const dispose = () => {
    if (disposed) return;
    disposed = true;
    if (file) {
      file.stream.destroy();
      rmSync(file.path, { force: true });
    }
  };

  const spool = (chunk: Buffer): boolean => {
    if (!file && memoryBytes + chunk.length <= SPOOL_MEMORY_BYTES) {
      memory.push(chunk);
      memoryBytes += chunk.length;
      return true;
    }
    if (!file) {
      const path = join(options.spoolDir ?? tmpdir(), `image-task-sidecar-form-${randomUUID()}`);
      file = { path, stream: createWriteStream(path, { flags: "wx", mode: 0o600 }) };
    }
    return file.stream.write(chunk);
  };

  try {
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (err?: unknown) => {
        if (settled) return;
        settled = true;
        unwatch();
        req.off("data", onData);
        req.off("end", onEnd);
        req.off("close", onClose);
        req.pause();
        if (err) reject(err);
        else resolve();
      };
      const onData = (chunk: Buffer) => {
        received += chunk.length;
        if (received > options.maxBytes) return settle(bodyTooLarge(options.maxBytes));
        try {
          scanner.push(chunk);
        } catch (err) {
          return settle(err);
        }
        if (!spool(chunk)) {
          req.pause();
          file?.stream.once("drain", () => req.resume());
        }
        // A closed form is read to its end, so what follows the close is checked too.
        if (scanner.model !== undefined && !scanner.closed) settle();
      };
      const onEnd = () => {
        ended = true;
        try {
          scanner.end();
        } catch (err) {
          return settle(err);
        }
        settle(
          scanner.model === undefined
            ? new AppError("missing_required_parameter", "Missing required parameter: 'model'.", {
                param: "model",
              })
            : undefined,
        );
      };
      const onClose = () => {
        if (!req.complete) settle(new AppError("invalid_value", "The request was aborted."));
      };
      const unwatch = watchBody(req, options, settle);
      req.on("data", onData);
      req.once("end", onEnd);
      req.once("close", onClose);
    });
    if (file) {
      const { stream } = file;
      await new Promise<void>((resolve, reject) => {
        stream.once("error", reject);
        stream.end(resolve);
      });
    }
  } catch (err) {
    dispose();
    throw err;
  }

  const spoolPath = file?.path;
  const model = scanner.model as string;
  async function* formBytes(): AsyncGenerator<Buffer> {
    started = true;
    yield* memory;
    if (spoolPath) yield* createReadStream(spoolPath) as AsyncIterable<Buffer>;
    if (ended) return;
    // A read waiting for a silent client never ends on its own: the time limits end it.
    // (One promise per read, not a race with one long-lived promise, which would keep
    // every chunk read.)
    let expired: unknown;
    let abortRead: ((err: unknown) => void) | undefined;
    const unwatch = watchBody(
      req,
      { timeoutMs: Math.max(0, deadline - performance.now()), idleMs: options.idleMs },
      (err) => {
        expired = err;
        abortRead?.(err);
      },
    );
    // Not destroyOnReturn: a refused form still gets its 400 on this connection.
    const chunks = req.iterator({ destroyOnReturn: false });
    const read = () =>
      new Promise<IteratorResult<Buffer>>((resolve, reject) => {
        if (expired) return reject(expired);
        abortRead = reject;
        chunks.next().then(resolve, reject);
      });
    // The chunk that closes the form, and anything after it, wait for the end of the
    // request: a channel must never hold a complete form that is then refused.
    const held: Buffer[] = [];
    try {
      for (let next = await read(); !next.done; next = await read()) {
        const chunk = next.value;
        received += chunk.length;
        if (received > options.maxBytes) throw bodyTooLarge(options.maxBytes);
        scanner.push(chunk);
        if (scanner.closed) held.push(chunk);
        else yield chunk;
      }
      scanner.end();
    } finally {
      unwatch();
    }
    yield* held;
  }

  return {
    model,
    contentType,
    contentLength,
    // A form received whole before the first try (its model came last) is all in the spool.
    canReopen: () => !started || ended,
    open() {
      return Readable.from(formBytes(), { objectMode: false });
    },
    dispose,
  };
}
