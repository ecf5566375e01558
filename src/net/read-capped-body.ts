/** A body was (or announced itself) larger than the reader's limit. */
export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`The body is larger than ${limit} bytes.`);
    this.name = "BodyTooLargeError";
  }
}

/** The part of a fetch `Response` (global or undici) that {@link readCappedBody} reads. */
export interface ResponseLike {
  headers: { get(name: string): string | null };
  body: ReadableStream<Uint8Array> | null;
}

/**
 * Reads a response body that someone else controls, counting as it arrives:
 * a `Content-Length` over `limit` is refused before reading, and past `limit`
 * bytes the body is cancelled (the connection dropped), so a huge or endless
 * body costs at most `limit` bytes of memory.
 *
 * @throws BodyTooLargeError over the limit; whatever the stream throws otherwise
 */
export async function readCappedBody(response: ResponseLike, limit: number): Promise<Buffer> {
  await refuseDeclaredOver(response, limit);
  if (!response.body) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => undefined);
      throw new BodyTooLargeError(limit);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, total);
}

/**
 * Refuses a body whose `Content-Length` is over `limit` before reading it
 * (the body cancelled, its connection dropped).
 * @throws BodyTooLargeError
 */
export async function refuseDeclaredOver(response: ResponseLike, limit: number): Promise<void> {
  const declared = Number(response.headers.get("content-length") ?? "");
  if (Number.isFinite(declared) && declared > limit) {
    await response.body?.cancel().catch(() => undefined);
    throw new BodyTooLargeError(limit);
  }
}
