import { JsonDocumentEnd } from "../net/json-document-end.js";
import { readToDocumentEnd } from "../net/read-to-document-end.js";
import type { ChannelAnswer } from "./channel-answer.js";

/**
 * A JSON answer read up to the end of its top-level object or array (see
 * {@link readToDocumentEnd}), at most `maxBytes`: the bytes of the document,
 * nothing after it. An answer that is no object or array is read to its end.
 */
export async function readJsonDocument(answer: ChannelAnswer, maxBytes: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  const end = new JsonDocumentEnd();
  await readToDocumentEnd(answer.chunks({ maxBytes }), (chunk) => {
    const at = end.push(chunk);
    parts.push(at === -1 ? chunk : chunk.subarray(0, at));
    return at !== -1;
  });
  return parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts);
}
