import type Keyv from "keyv";

/** What Keyv stores per entry: the value and its expiry time. */
export interface KeyvEntry {
  value?: unknown;
  expires?: number;
}

/** A Keyv serializer pair, as Keyv takes it. */
export interface KeyvCodec {
  serialize: (entry: KeyvEntry) => string;
  deserialize: <T>(text: string) => T;
}

/**
 * A string value that starts with `:` (Keyv escapes those as `::…`, and
 * writes Buffers as `:base64:…`) or a Buffer (`{"type":"Buffer"` natively),
 * as they appear in JSON text: a `"` opening a string (after `:`, `,`, `[`
 * or `{`) followed by `:`. Inside a JSON string a quote is always escaped, so
 * text that does not match holds none; a match may be a false alarm (a key
 * starting with `:`), which only costs the slow path.
 */
const NEEDS_KEYV_CODEC = /[:,[{]":|"type":"Buffer"/;

/**
 * Keyv's serializer, byte for byte, at the cost of native JSON. Keyv's own
 * (`@keyv/serialize`, taken from `keyv` itself) walks every value in
 * JavaScript to escape strings that start with `:` and to write Buffers as
 * base64, and parses with a reviver called on every value: a visible share
 * of a poll's CPU. Task records, indexes and base64 images almost never hold
 * such strings, so their text is written and read natively, and only text
 * that may hold one goes through Keyv's own code. Entries written before (or
 * by an older replica) read the same, and an older replica reads these.
 */
export function createKeyvCodec(keyv: Keyv): KeyvCodec {
  const fallbackSerialize = keyv.serialize;
  const fallbackDeserialize = keyv.deserialize;
  if (!fallbackSerialize || !fallbackDeserialize) throw new Error("Keyv without its serializer");
  return {
    serialize(entry) {
      const text = JSON.stringify(entry);
      return NEEDS_KEYV_CODEC.test(text) ? (fallbackSerialize(entry) as string) : text;
    },
    deserialize<T>(text: string): T {
      return (NEEDS_KEYV_CODEC.test(text) ? fallbackDeserialize(text) : JSON.parse(text)) as T;
    },
  };
}

/** Puts {@link createKeyvCodec}'s codec on `keyv` in place of its default one. */
export function useKeyvCodec(keyv: Keyv): KeyvCodec {
  const codec = createKeyvCodec(keyv);
  keyv.serialize = codec.serialize as NonNullable<Keyv["serialize"]>;
  keyv.deserialize = codec.deserialize as NonNullable<Keyv["deserialize"]>;
  return codec;
}
