import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { Readable } from "node:stream";
import busboy from "busboy";
import type { MultipartPart, RecordedForm } from "./fake-upstream-types.js";

/** Parts of a `multipart/form-data` body, read with busboy; undefined when it is not one. */
export async function readParts(
  headers: IncomingHttpHeaders,
  raw: Buffer,
): Promise<MultipartPart[] | undefined> {
  const parts: MultipartPart[] = [];
  let parser: busboy.Busboy;
  try {
    parser = busboy({ headers });
  } catch {
    return undefined;
  }
  const files: Array<Promise<void>> = [];
  parser.on("field", (name, value) => parts.push({ name, data: Buffer.from(value) }));
  parser.on("file", (name, stream, info) => {
    const part: MultipartPart = {
      name,
      filename: info.filename,
      contentType: info.mimeType,
      data: Buffer.alloc(0),
    };
    parts.push(part);
    const data: Buffer[] = [];
    files.push(
      new Promise((resolve) => {
        stream.on("data", (chunk: Buffer) => data.push(chunk));
        stream.on("end", () => {
          part.data = Buffer.concat(data);
          resolve();
        });
      }),
    );
  });
  const done = new Promise<void>((resolve, reject) => {
    parser.on("close", resolve);
    parser.on("error", reject);
  });
  Readable.from([raw]).pipe(parser);
  await done;
  await Promise.all(files);
  return parts;
}

/** A tiny multipart parser for what the fake records (bodies are whole in memory here). */
export function parseForm(contentType: string, raw: Buffer): RecordedForm | undefined {
  const boundary = /boundary="?([^";]+)"?/i.exec(contentType)?.[1];
  if (!boundary) return undefined;
  const form: RecordedForm = { fields: {}, counts: {}, files: {} };
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  let at = raw.indexOf(`--${boundary}`);
  if (at === -1) return form;
  at += boundary.length + 2;
  for (;;) {
    if (raw.subarray(at, at + 2).toString() === "--") break;
    const headerEnd = raw.indexOf("\r\n\r\n", at);
    const headers = raw.toString("latin1", at + 2, headerEnd);
    const end = raw.indexOf(delimiter, headerEnd + 4);
    if (headerEnd === -1 || end === -1) break;
    const content = raw.subarray(headerEnd + 4, end);
    const name = /name="([^"]*)"/i.exec(headers)?.[1] ?? "";
    const filename = /filename="([^"]*)"/i.exec(headers)?.[1];
    form.counts[name] = (form.counts[name] ?? 0) + 1;
    if (filename !== undefined) {
      form.files[name] ??= {
        filename,
        size: content.length,
        sha256: createHash("sha256").update(content).digest("hex"),
      };
    } else {
      form.fields[name] ??= content.toString("utf8");
    }
    at = end + delimiter.length;
  }
  return form;
}
