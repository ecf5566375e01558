import { isImageRef, type ImageRef } from "../core/response-state.js";

type Json = Record<string, unknown>;

/** Where one image of a Responses event or object sits: a field of a container. */
export interface ImageField {
  container: Json;
  field: string;
  /** `partial`: a `partial_image_b64`; `result`: an `image_generation_call`'s `result`. */
  kind: "partial" | "result";
  /** The `image_generation_call` item's id (results), by which a repeated image is known. */
  itemId?: string;
}

const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** An `image_generation_call` item's `result` field, if `item` is one. */
function itemField(item: unknown, fields: ImageField[]): void {
  if (!isObject(item) || item.type !== "image_generation_call") return;
  const itemId = typeof item.id === "string" ? item.id : undefined;
  fields.push({ container: item, field: "result", kind: "result", ...(itemId ? { itemId } : {}) });
}

/** Every `image_generation_call` item's `result` among a Response object's `output`. */
function objectFields(object: unknown, fields: ImageField[]): void {
  if (!isObject(object) || !Array.isArray(object.output)) return;
  for (const item of object.output) itemField(item, fields);
}

/**
 * The places of a Responses stream event (or, with no `type`, a Response
 * object) that carry an image's base64: a partial image's
 * `partial_image_b64`, an output item's `result`, and the `result`s of the
 * output of the response an event carries. Nothing else of an event is ever
 * read as an image.
 */
export function imageFields(event: Json): ImageField[] {
  const fields: ImageField[] = [];
  if (event.type === "response.image_generation_call.partial_image") {
    fields.push({ container: event, field: "partial_image_b64", kind: "partial" });
  }
  if (event.type === undefined) objectFields(event, fields);
  itemField(event.item, fields);
  objectFields(event.response, fields);
  return fields;
}

/**
 * Replaces each image reference of an event or object the service keeps with
 * what `open` makes of it (its bytes read when sent), on copies of the
 * containers: the value given is not changed. Anything else in an image's
 * place (none, or what a channel sent that is not one) becomes null.
 */
export function restoreImages<T>(value: Json, open: (ref: ImageRef) => T): Json {
  const copy = structuredCloneJson(value);
  for (const { container, field } of imageFields(copy)) {
    const current = container[field];
    if (current === undefined) continue;
    container[field] = isImageRef(current) ? open(current) : null;
  }
  return copy;
}

/**
 * A deep copy of JSON (what a record or event is): the places restored get
 * objects that are not JSON (pending images), so the original must not.
 */
function structuredCloneJson(value: Json): Json {
  return JSON.parse(JSON.stringify(value)) as Json;
}

/** Whether logged JSON holds an image reference (a quick look before parsing it). */
export function mayHoldImages(json: string): boolean {
  return json.includes('{"$image":');
}
