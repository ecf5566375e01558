/** A Responses API object the demo created, with what its stored-response routes read. */
export interface StoredResponse {
  /** The response as `GET /v1/responses/{id}` answers it (a background one changes in place). */
  response: Record<string, unknown>;
  /** Its input as items with ids, oldest first, for `GET .../input_items`. */
  inputItems: Array<Record<string, unknown>>;
  /** What keeping it costs, roughly: the request's bytes and the reply's. */
  bytes: number;
  /** A background response's pending finish, cleared on cancel, delete and eviction. */
  timer?: NodeJS.Timeout;
}

/** The responses the demo keeps, oldest dropped first. */
export interface DemoResponseStore {
  get(id: string): StoredResponse | undefined;
  set(id: string, entry: StoredResponse): void;
  delete(id: string): boolean;
  /** Drops everything, stopping pending background finishes (the demo channel closes). */
  clear(): void;
}

/** Bounds of {@link createDemoResponseStore}. */
export interface DemoResponseStoreLimits {
  /** Responses kept at most. Default 1000. */
  maxEntries?: number;
  /** Their request and reply bytes at most (inputs may carry images). Default 64 MiB. */
  maxBytes?: number;
}

/**
 * Keeps the demo's responses in memory, bounded by count and bytes: the demo runs inside the
 * service's process, so a long demo session must not grow it without end. The newest response
 * is always kept, so a client can read back what it just created.
 */
export function createDemoResponseStore(limits: DemoResponseStoreLimits = {}): DemoResponseStore {
  const maxEntries = limits.maxEntries ?? 1000;
  const maxBytes = limits.maxBytes ?? 64 * 1024 * 1024;
  const entries = new Map<string, StoredResponse>();
  let bytes = 0;

  const remove = (id: string): boolean => {
    const entry = entries.get(id);
    if (!entry) return false;
    clearTimeout(entry.timer);
    entries.delete(id);
    bytes -= entry.bytes;
    return true;
  };

  return {
    get: (id) => entries.get(id),
    set(id, entry) {
      remove(id);
      entries.set(id, entry);
      bytes += entry.bytes;
      for (const oldest of entries.keys()) {
        if (entries.size <= 1 || (entries.size <= maxEntries && bytes <= maxBytes)) break;
        remove(oldest);
      }
    },
    delete: remove,
    clear() {
      for (const id of [...entries.keys()]) remove(id);
    },
  };
}
