import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import busboy from "busboy";
import { DemoRequestError } from "./demo-http-helpers.js";

/** Bytes of a file's start that are kept: enough for a PNG's or a WAV's header. */
const HEAD_BYTES = 64;

/** A file part, read through but not kept: what the demo's made-up answers depend on. */
export interface DemoFormFile {
  /** The form field (`image`, `image[]`, `mask`, `file`). */
  field: string;
  filename: string;
  mimeType: string;
  /** Its size in bytes. */
  bytes: number;
  /** SHA-256 of its bytes, hex: different inputs get different pictures. */
  sha256: string;
  /** Its first bytes, for the dimensions of a PNG or the format of a WAV. */
  head: Buffer;
}

/** A `multipart/form-data` body as the demo sees it. */
export interface DemoForm {
  /** Text fields by name, every value in the order sent (`timestamp_granularities[]` repeats). */
  fields: Map<string, string[]>;
  files: DemoFormFile[];
}

/**
 * Reads the body of a route that takes only forms.
 * @param needs what the form must carry, for the error (`an 'image' file`)
 * @throws DemoRequestError 400 `invalid_value` for another body
 */
export function readRequiredForm(req: IncomingMessage, needs: string): Promise<DemoForm> {
  if (isMultipartRequest(req)) return readDemoForm(req);
  req.resume();
  return Promise.reject(malformed(`The request body must be multipart/form-data with ${needs}.`));
}

/** Whether the request's body is `multipart/form-data` (edits also take JSON). */
export function isMultipartRequest(req: IncomingMessage): boolean {
  return /^multipart\/form-data\s*(;|$)/i.test(req.headers["content-type"] ?? "");
}

/** The first value of a text field. */
export function formField(form: DemoForm, name: string): string | undefined {
  return form.fields.get(name)?.[0];
}

/**
 * Reads a multipart body with busboy as it streams in. Files are hashed and counted, never held
 * in memory: the demo runs on the service's own event loop and its answers only need to differ
 * per input, not to look at the pixels or the sound.
 *
 * @throws DemoRequestError 400 `invalid_value` for a body that is not a well-formed form
 */
export function readDemoForm(req: IncomingMessage): Promise<DemoForm> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        limits: { fieldSize: 1024 * 1024, fields: 200, files: 32 },
      });
    } catch {
      req.resume();
      reject(malformed("The request body must be multipart/form-data with a boundary."));
      return;
    }
    const form: DemoForm = { fields: new Map(), files: [] };
    parser.on("field", (name, value) => {
      const values = form.fields.get(name);
      if (values) values.push(value);
      else form.fields.set(name, [value]);
    });
    const reading: Array<Promise<void>> = [];
    parser.on("file", (field, stream, info) => {
      const file: DemoFormFile = {
        field,
        filename: info.filename ?? "file",
        mimeType: info.mimeType,
        bytes: 0,
        sha256: "",
        head: Buffer.alloc(0),
      };
      form.files.push(file);
      const hash = createHash("sha256");
      const head: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => {
        if (file.bytes < HEAD_BYTES) head.push(chunk.subarray(0, HEAD_BYTES - file.bytes));
        file.bytes += chunk.length;
        hash.update(chunk);
      });
      // busboy may close before a file stream has emitted its end.
      reading.push(
        new Promise((done) => {
          stream.once("end", () => {
            file.sha256 = hash.digest("hex");
            file.head = Buffer.concat(head);
            done();
          });
          // A form that ends inside a file: busboy destroys the file's stream with its error
          // (unheard, it would stop the process); the parser's own error answers the request.
          stream.once("error", () => done());
        }),
      );
    });
    parser.on("close", () => void Promise.all(reading).then(() => resolve(form)));
    parser.on("error", (err: Error) => {
      req.unpipe(parser);
      req.resume();
      reject(malformed(`The multipart body is malformed: ${err.message}`));
    });
    // A client that leaves mid-upload: no answer is needed, but the request must end.
    req.once("close", () => {
      if (!req.complete) reject(malformed("The upload was cut off."));
    });
    req.pipe(parser);
  });
}

function malformed(message: string): DemoRequestError {
  return new DemoRequestError(400, {
    message,
    type: "invalid_request_error",
    code: "invalid_value",
  });
}
