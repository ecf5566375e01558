import { allocPageAligned } from "../../fs/page-aligned-buffer.js";

/**
 * Buffers that images are decoded into, kept for the next run once their
 * bytes are stored. A fresh 3 MB buffer per image costs page faults on every
 * page, and V8 counts its memory as external, which starts a full garbage
 * collection every few real-size tasks; a reused one costs neither. Each
 * starts on a memory page, so that the file image store can write an image
 * from it straight to the disk (`fs/direct-write.ts`).
 *
 * A buffer comes back only through {@link releaseImageBuffers}, once nothing
 * reads it any more; one never given back is simply collected. Idle buffers
 * are dropped after a short while, so that a quiet service holds none.
 */

/** Buffers are allocated in steps of this, so that images of about the same size share them. */
const STEP_BYTES = 256 * 1024;
/**
 * The most idle buffers held at once, in bytes: about 16 real-size images, as many as run at
 * once with `maxConcurrent: 16`. Idle buffers come only from runs that ended, so this holds no
 * more than those runs held; with 16 MiB, 16 tasks at a time mostly took fresh buffers, whose
 * first touch of each page costs a fault in the host on a VM (0.83x the CPU a real-size task
 * at 64 MiB, 3 interleaved runs of 160 tasks).
 */
const MAX_IDLE_BYTES = 64 * 1024 * 1024;
/** Idle buffers are dropped after this long without a buffer given back. */
const IDLE_MS = 1_000;

/** The buffers idle, and the backing stores of those lent (only those come back). */
const idle: Buffer[] = [];
let idleBytes = 0;
const lent = new WeakSet<ArrayBufferLike>();
let dropTimer: NodeJS.Timeout | undefined;

/**
 * A buffer of at least `bytes` bytes to decode an image into: an idle one
 * when one is large enough, else a new one. Its contents are arbitrary.
 */
export function takeImageBuffer(bytes: number): Buffer {
  let best = -1;
  for (let n = 0; n < idle.length; n += 1) {
    const length = idle[n]!.length;
    if (length >= bytes && (best === -1 || length < idle[best]!.length)) best = n;
  }
  let buffer: Buffer;
  if (best === -1) {
    buffer = allocPageAligned(Math.ceil(bytes / STEP_BYTES) * STEP_BYTES);
  } else {
    buffer = idle.splice(best, 1)[0]!;
    idleBytes -= buffer.length;
  }
  lent.add(buffer.buffer);
  return buffer;
}

/**
 * Gives back the buffers that `views` (images decoded by a `B64Extractor`)
 * lie in, once their bytes are stored and no longer read: the next image is
 * decoded over them. Views of any other buffer, or given back already, are
 * left alone.
 */
export function releaseImageBuffers(views: Iterable<Uint8Array>): void {
  for (const view of views) {
    const store = view.buffer;
    if (!lent.delete(store)) continue;
    if (idleBytes + store.byteLength > MAX_IDLE_BYTES) continue;
    idle.push(Buffer.from(store));
    idleBytes += store.byteLength;
    armDrop();
  }
}

/** Buffers idle now, in bytes (for tests). */
export function idleImageBufferBytes(): number {
  return idleBytes;
}

function armDrop(): void {
  if (dropTimer) {
    dropTimer.refresh();
    return;
  }
  dropTimer = setTimeout(() => {
    dropTimer = undefined;
    idle.length = 0;
    idleBytes = 0;
  }, IDLE_MS);
  dropTimer.unref();
}
