/**
 * Small entries with a time to live, kept where every replica sees them alike
 * (Redis, the SQLite file) or in this process's memory: which channel created
 * a stored response, say. Values are plain JSON-compatible data.
 */
export interface KeyValue {
  /**
   * True when the entries live in this process only (nothing persisted or
   * shared), each namespace in a map of its own: a caller may then key them
   * as it likes, not as earlier releases wrote them. Default false.
   */
  readonly inMemory?: boolean;
  /** The value under `key`, or undefined when there is none or it has expired. */
  get(key: string): Promise<unknown>;
  /** Sets `key` to `value` for `ttlMs` milliseconds. */
  set(key: string, value: unknown, ttlMs: number): Promise<void>;
  /** Deletes `key`; a missing one is fine. */
  delete(key: string): Promise<void>;
}
