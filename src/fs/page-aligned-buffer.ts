/**
 * Buffers whose first byte lies on a memory page boundary, as a write that
 * bypasses the page cache (`O_DIRECT`, see `direct-write.ts`) needs them.
 * Node has no aligned allocation; a WebAssembly memory is one: V8 maps it
 * from the page allocator, so it starts on a page (at a 64 KiB boundary). Its
 * address space is reserved, not used: pages count once written.
 */

/**
 * The alignment asked of a direct write's memory, file offset and length:
 * the largest logical block size disks use (4 KiB), which a 512-byte one
 * divides.
 */
export const DIRECT_IO_ALIGNMENT = 4096;

/** WebAssembly's page: memories grow in these. */
const WASM_PAGE_BYTES = 64 * 1024;

/** What is used of WebAssembly (the build's `lib` has no types for it; `--jitless` has none). */
interface WasmMemoryApi {
  Memory: new (descriptor: { initial: number; maximum: number }) => { buffer: ArrayBuffer };
}
const wasm = (globalThis as { WebAssembly?: WasmMemoryApi }).WebAssembly;

/** The backing stores known to start on a page. */
const aligned = new WeakSet<ArrayBufferLike>();

/**
 * A buffer of at least `bytes` bytes (rounded up to 64 KiB) starting on a
 * page, zero-filled. Where WebAssembly is missing (`--jitless`) or its memory
 * cannot be reserved (an address-space limit), an ordinary buffer instead,
 * which {@link isPageAligned} tells apart.
 */
export function allocPageAligned(bytes: number): Buffer {
  const pages = Math.max(1, Math.ceil(bytes / WASM_PAGE_BYTES));
  try {
    if (!wasm) throw new Error("no WebAssembly");
    const memory = new wasm.Memory({ initial: pages, maximum: pages });
    aligned.add(memory.buffer);
    return Buffer.from(memory.buffer);
  } catch {
    return Buffer.alloc(pages * WASM_PAGE_BYTES);
  }
}

/**
 * Whether `view` starts on a page boundary of a buffer from
 * {@link allocPageAligned} (then it may be written directly).
 */
export function isPageAligned(view: Uint8Array): boolean {
  return view.byteOffset % DIRECT_IO_ALIGNMENT === 0 && aligned.has(view.buffer);
}
