import type { IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import busboy from "busboy";
import { ServiceError } from "../../errors/service-error.js";
import { watchBody, type BodyTiming } from "../../http/watch-body.js";

/** A `multipart/form-data` body, read whole. */
export interface MultipartForm {
  /** Text fields in the order they came (a name may repeat). */
  fields: Array<{ name: string; value: string }>;
  /** File parts in the order they came. */
  files: Array<{ name: string; bytes: Buffer }>;
}

/** Limits of {@link readMultipartForm}. */
export interface MultipartLimits extends BodyTiming {
  /** The whole body, in bytes (413 `request_too_large` beyond it). */
  maxBytes: number;
  /** Names a file part may have; any other file is refused (400, naming it). */
  fileFields: ReadonlySet<string>;
  /** File parts, at most. */
  maxFiles: number;
  /** Text fields, at most. */
  maxFields: number;
  /** One text field, in bytes. */
  maxFieldBytes: number;
}

/** Whether the request's body is `multipart/form-data`. */
export function isMultipart(req: IncomingMessage): boolean {
  return /^multipart\/form-data\s*(;|$)/i.test(req.headers["content-type"] ?? "");
}

/**
 * Reads a `multipart/form-data` body with busboy, a streaming parser: each
 * part is checked as it arrives, so a body over `maxBytes` (declared or
 * actual), a file of an unexpected field, or too many parts is refused before
 * the rest is read; the connection is then closed rather than drained.
 *
 * @throws ServiceError `request_too_large`, `request_timeout`, `invalid_value` (the field in `param`)
 */
export function readMultipartForm(
  req: IncomingMessage,
  limits: MultipartLimits,
): Promise<MultipartForm> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limits.maxBytes) {
    return Promise.reject(tooLarge(limits));
  }
  const encoding = req.headers["content-encoding"];
  if (encoding && encoding.toLowerCase() !== "identity") {
    return Promise.reject(
      invalid(null, `A multipart body must not be compressed (Content-Encoding: ${encoding}).`),
    );
  }

  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        limits: {
          fileSize: limits.maxBytes,
          files: limits.maxFiles,
          fields: limits.maxFields,
          fieldSize: limits.maxFieldBytes,
          parts: limits.maxFiles + limits.maxFields,
        },
      });
    } catch {
      reject(invalid(null, "The multipart body has no boundary in its Content-Type."));
      return;
    }
    new MultipartRead(req, limits, parser, resolve, reject).start();
  });
}

/** One form being read: settles once, with the form or the first refusal. */
class MultipartRead {
  private readonly form: MultipartForm = { fields: [], files: [] };
  private settled = false;
  private received = 0;
  private pendingFiles = 0;
  private finished = false;
  private unwatch!: () => void;

  constructor(
    private readonly req: IncomingMessage,
    private readonly limits: MultipartLimits,
    private readonly parser: busboy.Busboy,
    private readonly resolve: (form: MultipartForm) => void,
    private readonly reject: (err: ServiceError) => void,
  ) {}

  /** Properties, not methods: they are listeners, taken off again by identity. */
  private readonly fail = (err: ServiceError): void => {
    if (this.settled) return;
    this.settled = true;
    this.unwatch();
    this.req.unpipe(this.parser);
    this.req.off("data", this.count);
    // Left unread: the error answer closes the connection (see `sendError`).
    this.reject(err);
  };

  private readonly count = (chunk: Buffer): void => {
    this.received += chunk.length;
    if (this.received > this.limits.maxBytes) this.fail(tooLarge(this.limits));
  };

  start(): void {
    const { req, parser, limits, fail } = this;
    this.unwatch = watchBody(req, limits, fail);
    req.on("data", this.count);
    // busboy gives a part without a name (none, or `name=""`) an undefined one, whatever its
    // types say: such a form is refused, where `name.slice` threw out of the parser's listener
    // and took the whole process down.
    parser.on("file", (name: string | undefined, stream, info) => {
      if (name) this.onFile(name, stream, info);
      else this.unnamed(stream);
    });
    parser.on("field", (name: string | undefined, value, info) => {
      if (name) this.onField(name, value, info);
      else this.unnamed();
    });
    parser.on("filesLimit", () =>
      fail(invalid(null, `At most ${limits.maxFiles} files may be sent.`)),
    );
    parser.on("fieldsLimit", () =>
      fail(invalid(null, `At most ${limits.maxFields} fields may be sent.`)),
    );
    parser.on("partsLimit", () => fail(invalid(null, "The form has too many parts.")));
    parser.on("error", () => fail(invalid(null, "The multipart body is malformed.")));
    parser.on("close", () => {
      this.finished = true;
      this.done();
    });
    req.on("aborted", () => fail(invalid(null, "The request body broke off.")));
    req.pipe(parser);
  }

  private done(): void {
    if (this.settled || !this.finished || this.pendingFiles > 0) return;
    this.settled = true;
    this.unwatch();
    this.req.off("data", this.count);
    this.resolve(this.form);
  }

  private unnamed(stream?: Readable): void {
    stream?.resume();
    this.fail(invalid(null, "The multipart form is malformed: a part has no field name."));
  }

  private onFile(name: string, stream: Readable, info: busboy.FileInfo): void {
    const { fail } = this;
    if (!this.limits.fileFields.has(name)) {
      stream.resume();
      fail(invalid(name, `Unexpected file field '${name.slice(0, 100)}'.`));
      return;
    }
    this.pendingFiles += 1;
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("limit", () => fail(tooLarge(this.limits)));
    stream.on("error", () => fail(invalid(name, `The file '${info.filename}' broke off.`)));
    stream.on("end", () => {
      this.pendingFiles -= 1;
      this.form.files.push({ name, bytes: Buffer.concat(chunks) });
      this.done();
    });
  }

  private onField(name: string, value: string, info: busboy.FieldInfo): void {
    if (info.nameTruncated || info.valueTruncated) {
      this.fail(invalid(name.slice(0, 100), `The field '${name.slice(0, 100)}' is too long.`));
      return;
    }
    this.form.fields.push({ name, value });
  }
}

function tooLarge(limits: MultipartLimits): ServiceError {
  return new ServiceError(
    "request_too_large",
    `The request body is larger than ${limits.maxBytes} bytes (server.maxUploadBytes).`,
  );
}

function invalid(param: string | null, message: string): ServiceError {
  return new ServiceError("invalid_value", message, { param });
}
