import type { KeyValue } from "../collections/key-value.js";

/** Who created a Responses API object, and on which channel it lives. */
export interface ResponseOwner {
  /** Name of the channel that answered the `POST /v1/responses`. */
  channel: string;
  /** The creating principal's `subject`; only it may reach the response. */
  owner: string;
}

/**
 * Remembers which channel created each response and for whom, so
 * `GET/DELETE /v1/responses/{id}`, `.../cancel`, `.../input_items` and a
 * `previous_response_id` reach that channel, and only for that key.
 */
export interface ResponseOwners {
  remember(id: string, owner: ResponseOwner): Promise<void>;
  lookup(id: string): Promise<ResponseOwner | undefined>;
  forget(id: string): Promise<void>;
}

/** Longest response id looked up; OpenAI's are ~50 characters. */
const MAX_ID_LENGTH = 200;
const keyOf = (id: string) => `response-owner:${id}`;

/**
 * {@link ResponseOwners} on the task backend's key-value entries (this
 * process's memory, SQLite or the store every replica shares), kept `ttlMs`
 * (the task retention).
 */
export function createResponseOwners(entries: KeyValue, ttlMs: number): ResponseOwners {
  return {
    async remember(id, owner) {
      if (id.length > MAX_ID_LENGTH) return;
      await entries.set(keyOf(id), { channel: owner.channel, owner: owner.owner }, ttlMs);
    },
    async lookup(id) {
      if (id.length > MAX_ID_LENGTH) return undefined;
      const found = (await entries.get(keyOf(id))) as Partial<ResponseOwner> | undefined;
      if (typeof found?.channel !== "string" || typeof found.owner !== "string") return undefined;
      return { channel: found.channel, owner: found.owner };
    },
    async forget(id) {
      await entries.delete(keyOf(id));
    },
  };
}
