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
/** The key of a response's entry in a persisted store, as every release has written it. */
const persistedKey = (id: string) => `response-owner:${id}`;
/** Owners kept shared per channel, past which a channel's are forgotten and made anew. */
const MAX_SHARED_OWNERS = 4096;

/**
 * {@link ResponseOwners} on the task backend's key-value entries (this
 * process's memory, SQLite or the store every replica shares), kept `ttlMs`
 * (the task retention).
 *
 * In memory, where the entries of every `/v1/responses` answer are held
 * until they expire, an entry is keyed by the bare id and holds an owner
 * object shared by every response of that key on that channel: each answer
 * leaves the id and its map entry, not a prefixed key (two strings, once
 * flattened) and an owner object of its own, for V8's young generation to
 * copy until it is promoted.
 */
export function createResponseOwners(entries: KeyValue, ttlMs: number): ResponseOwners {
  const keyOf = entries.inMemory ? (id: string) => id : persistedKey;
  const ownerOf = entries.inMemory ? createSharedOwners() : copyOwner;
  return {
    async remember(id, owner) {
      if (id.length > MAX_ID_LENGTH) return;
      await entries.set(keyOf(id), ownerOf(owner), ttlMs);
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

/** Only the two fields, whatever else the caller's object carries. */
function copyOwner(owner: ResponseOwner): ResponseOwner {
  return { channel: owner.channel, owner: owner.owner };
}

/**
 * One frozen owner object per channel and key. Two maps, not one keyed by a
 * joined string: a lookup allocates nothing. Bounded, as forward mode's keys
 * are the clients'.
 */
function createSharedOwners(): (owner: ResponseOwner) => ResponseOwner {
  const byChannel = new Map<string, Map<string, ResponseOwner>>();
  return ({ channel, owner }) => {
    let owners = byChannel.get(channel);
    if (!owners) byChannel.set(channel, (owners = new Map()));
    let shared = owners.get(owner);
    if (!shared) {
      if (owners.size >= MAX_SHARED_OWNERS) owners.clear();
      shared = Object.freeze({ channel, owner });
      owners.set(owner, shared);
    }
    return shared;
  };
}
