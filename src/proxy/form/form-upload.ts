import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream, rmSync, type WriteStream } from "node:fs";
import type { IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { ChannelBodySource } from "../../channels/channel-client.js";
import { ServiceError } from "../../errors/service-error.js";
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
   * ServiceError). Nothing is taken from the spool or the client before the
   * channel client reads it, which it does once connected.
   */
  open(): Readable;
  /**
   * False once a stream began to take the rest of the form from its client:
   * no other channel can get it then. A form received whole before the first
   * try (`model` came last) can always be sent again.
   */
  canReopen(): boolean;
  /** The form's `n` field once it was read whole (see `FormScanner.nField`). */
  nField(): string | undefined | null;
  /** Removes the spool file. */
  dispose(): void;
}

/**
 * Receives a multipart form up to its `model` field: what comes before is
 * spooled (in memory up to 256 KiB, then to a temporary file), the rest is
 * left on the wire until a channel is connected. The whole form is never in
 * memory. SDKs send `model` before or after the files; either works.
 * @throws ServiceError `invalid_value` (malformed, ambiguous), `missing_required_parameter`,
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
    throw new ServiceError("invalid_value", "A multipart body must not have a Content-Encoding.");
  }
  const declared = req.headers["content-length"];
  const contentLength = declared === undefined ? undefined : Number(declared);
  if (contentLength !== undefined && contentLength > options.maxBytes) {
    throw bodyTooLarge(options.maxBytes);
  }
  const form = new SpooledForm(req, options, scanner, contentType, contentLength);
  try {
    await form.receiveHead();
    if (form.file) await endStream(form.file.stream);
  } catch (err) {
    form.dispose();
    throw err;
  }
  form.model = scanner.model as string;
  return form;
}

/**
 * A form from {@link receiveFormHead}'s first read to its last: one object
 * per request, its steps methods, so a form costs no closures beyond the
 * event listeners it needs.
 */
class SpooledForm implements FormUpload {
  model = "";
  /** `performance.now()` by which the whole form must have arrived. */
  private readonly deadline: number;
  private readonly memory: Buffer[] = [];
  private memoryBytes = 0;
  /** The spool's file, once the head outgrew {@link SPOOL_MEMORY_BYTES}. */
  file: { path: string; stream: WriteStream } | undefined;
  private received = 0;
  private ended = false;
  private started = false;
  private disposed = false;
  /** Fails the head's read, while it is under way, with a spool write's error. */
  private spoolFailed: ((err: unknown) => void) | undefined;

  constructor(
    private readonly req: IncomingMessage,
    private readonly options: FormUploadOptions,
    private readonly scanner: FormScanner,
    readonly contentType: string,
    readonly contentLength: number | undefined,
  ) {
    this.deadline = performance.now() + options.timeoutMs;
  }

  // A form received whole before the first try (its model came last) is all in the spool.
  canReopen(): boolean {
    return !this.started || this.ended;
  }

  open(): Readable {
    return Readable.from(this.formBytes(), { objectMode: false });
  }

  nField(): string | undefined | null {
    return this.scanner.nField();
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.file) removeSpool(this.file.stream, this.file.path);
  }

  /** Reads the request up to the `model` field (or its end), spooling what it reads. */
  receiveHead(): Promise<void> {
    const { req, options, scanner } = this;
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (err?: unknown) => {
        if (settled) return;
        settled = true;
        this.spoolFailed = undefined;
        unwatch();
        req.off("data", onData);
        req.off("end", onEnd);
        req.off("close", onClose);
        req.pause();
        if (err) reject(err);
        else resolve();
      };
      const onData = (chunk: Buffer) => {
        this.received += chunk.length;
        if (this.received > options.maxBytes) return settle(bodyTooLarge(options.maxBytes));
        try {
          scanner.push(chunk);
        } catch (err) {
          return settle(err);
        }
        if (!this.spool(chunk)) {
          req.pause();
          this.file?.stream.once("drain", () => req.resume());
        }
        // A closed form is read to its end, so what follows the close is checked too.
        if (scanner.model !== undefined && !scanner.closed) settle();
      };
      const onEnd = () => {
        this.ended = true;
        try {
          scanner.end();
        } catch (err) {
          return settle(err);
        }
        settle(
          scanner.model === undefined
            ? new ServiceError(
                "missing_required_parameter",
                "Missing required parameter: 'model'.",
                {
                  param: "model",
                },
              )
            : undefined,
        );
      };
      const onClose = () => {
        if (!req.complete) settle(new ServiceError("invalid_value", "The request was aborted."));
      };
      const unwatch = watchBody(req, options, settle);
      this.spoolFailed = settle;
      req.on("data", onData);
      req.once("end", onEnd);
      req.once("close", onClose);
    });
  }

  /** Keeps a chunk of the head; false when the spool file asks to wait for "drain". */
  private spool(chunk: Buffer): boolean {
    if (!this.file && this.memoryBytes + chunk.length <= SPOOL_MEMORY_BYTES) {
      this.memory.push(chunk);
      this.memoryBytes += chunk.length;
      return true;
    }
    if (!this.file) {
      const path = join(
        this.options.spoolDir ?? tmpdir(),
        `image-task-sidecar-form-${randomUUID()}`,
      );
      const stream = createWriteStream(path, { flags: "wx", mode: 0o600 });
      // Listened to for its whole life: a spool that cannot be written (a full or read-only
      // temp directory) fails the request, and a write still under way when the form is
      // refused or its client goes away fails with ERR_STREAM_DESTROYED once the spool is
      // disposed. Unheard, either 'error' ended the whole process.
      stream.on("error", (err) => this.spoolFailed?.(err));
      this.file = { path, stream };
    }
    return this.file.stream.write(chunk);
  }

  /** The whole form: the spool, then the rest from the client as it arrives. */
  private async *formBytes(): AsyncGenerator<Buffer> {
    const { req, options, scanner } = this;
    this.started = true;
    yield* this.memory;
    if (this.file) yield* createReadStream(this.file.path) as AsyncIterable<Buffer>;
    if (this.ended) return;
    // A read waiting for a silent client never ends on its own: the time limits end it.
    // (One promise per read, not a race with one long-lived promise, which would keep
    // every chunk read.)
    let expired: unknown;
    let abortRead: ((err: unknown) => void) | undefined;
    const unwatch = watchBody(
      req,
      { timeoutMs: Math.max(0, this.deadline - performance.now()), idleMs: options.idleMs },
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
        this.received += chunk.length;
        if (this.received > options.maxBytes) throw bodyTooLarge(options.maxBytes);
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
}

/**
 * Closes a spool file and removes it. Its open may still be under way (file
 * opens wait for a free thread of libuv's pool, on a loaded machine for long):
 * the file appears only then, so it is removed once the stream closed, not
 * before (a file removed before its open came back stayed behind).
 */
function removeSpool(stream: WriteStream, path: string): void {
  const remove = () => rmSync(path, { force: true });
  if (stream.closed) {
    remove();
    return;
  }
  stream.once("close", remove);
  stream.destroy();
}

/**
 * Resolves once everything written to `stream` is in its file; rejects with its error (one that
 * came before the end, such as a file that could not be opened, reaches `end`'s callback
 * first).
 */
function endStream(stream: WriteStream): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    stream.once("error", reject);
    stream.end((err?: Error | null) => (err ? reject(err) : resolve()));
  });
}
