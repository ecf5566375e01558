/**
 * How long an answer is still read, in the background, after its document
 * (a JSON object, an image) closed, for its end (the connection is then
 * reused); past it, the answer is dropped and its connection closed.
 */
export const AFTER_DOCUMENT_MS = 1000;

/**
 * Feeds an answer's chunks to `take` until the answer ends, or until `take`
 * says the document it reads (a JSON object, an image) has closed, and returns then: the caller
 * has the whole document and goes on. What comes after it is read in the
 * background and dropped: its end is waited for {@link AFTER_DOCUMENT_MS} at
 * most (so the connection is reused), then the answer is discarded; a failure
 * of the answer after the document (more than it may hold, a cut, an abort)
 * only ends that reading. The channel made (and billed) what the document
 * holds, whatever it sends after it, and a channel or proxy that holds its
 * answer open after the document costs the caller nothing.
 * @param take reads one chunk; true once the document closed (in that chunk or before)
 * @throws whatever the answer or `take` throws before the document closed
 */
export async function readToDocumentEnd(
  chunks: AsyncIterableIterator<Buffer>,
  take: (chunk: Buffer) => boolean,
): Promise<void> {
  let ended: boolean;
  try {
    ended = await readUntil(chunks, take);
  } catch (err) {
    // Given up on (`take` threw, or the answer failed): dropped, its connection closed.
    await chunks.return?.();
    throw err;
  }
  if (!ended) void readRest(chunks);
}

/** Feeds chunks to `take` until it says done (false) or the answer ends (true). */
async function readUntil(
  chunks: AsyncIterableIterator<Buffer>,
  take: (chunk: Buffer) => boolean,
): Promise<boolean> {
  for (;;) {
    const next = await chunks.next();
    if (next.done) return true;
    if (take(next.value)) return false;
  }
}

/**
 * Reads what follows a document to the answer's end, for
 * {@link AFTER_DOCUMENT_MS} at most; then, or when the answer fails, drops
 * it (closing its connection). Never throws: nobody waits for it.
 */
async function readRest(chunks: AsyncIterableIterator<Buffer>): Promise<void> {
  let ended = false;
  try {
    const deadline = Date.now() + AFTER_DOCUMENT_MS;
    while (!ended) {
      const next = await nextWithin(chunks, deadline - Date.now());
      if (next === undefined) break;
      ended = next.done === true;
    }
  } catch {
    // A failure after the document is only the rest's: what it held is read already.
  } finally {
    if (!ended) await Promise.resolve(chunks.return?.()).catch(() => undefined);
  }
}

/** The next chunk, or undefined when `ms` passed first. */
async function nextWithin(
  chunks: AsyncIterableIterator<Buffer>,
  ms: number,
): Promise<IteratorResult<Buffer> | undefined> {
  if (ms <= 0) return undefined;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([chunks.next(), late]);
  } finally {
    clearTimeout(timer);
  }
}
