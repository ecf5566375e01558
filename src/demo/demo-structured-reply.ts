import { isJsonObject } from "./demo-http-helpers.js";

/** Nesting the sample follows before it answers `null`; schemas may be recursive. */
const MAX_DEPTH = 8;

/**
 * The reply for a request that asks for JSON (chat's `response_format`, the Responses API's
 * `text.format`): for `json_schema`, a value that fits the schema, its strings filled with the
 * demo reply; for `json_object`, `{"reply": ...}`. `undefined` for plain text.
 *
 * So structured-output clients (`generateObject` of the Vercel AI SDK, `zodResponseFormat`, ...)
 * get something their schema accepts from the demo as well.
 */
export function structuredReply(format: unknown, reply: string): string | undefined {
  if (!isJsonObject(format)) return undefined;
  if (format.type === "json_object") return JSON.stringify({ reply });
  if (format.type !== "json_schema") return undefined;
  // Chat nests the schema in `json_schema`; the Responses API puts it on the format itself.
  const holder = isJsonObject(format.json_schema) ? format.json_schema : format;
  const schema = isJsonObject(holder.schema) ? holder.schema : {};
  return JSON.stringify(sample(schema, schema, reply, 0));
}

function sample(
  schema: Record<string, unknown>,
  root: Record<string, unknown>,
  reply: string,
  depth: number,
): unknown {
  if (depth > MAX_DEPTH) return null;
  const next = (s: unknown) => (isJsonObject(s) ? sample(s, root, reply, depth + 1) : null);
  if (typeof schema.$ref === "string") return next(resolveRef(schema.$ref, root));
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  for (const key of ["anyOf", "oneOf", "allOf"] as const) {
    const options = schema[key];
    if (Array.isArray(options) && options.length > 0) {
      return next(options.find((o) => isJsonObject(o) && o.type !== "null") ?? options[0]);
    }
  }
  if ("default" in schema) return schema.default;
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  const type = types.find((t) => t !== "null") ?? types[0];
  switch (type) {
    case "object": {
      const properties = isJsonObject(schema.properties) ? schema.properties : {};
      return Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, next(v)]));
    }
    case "array": {
      const count = typeof schema.minItems === "number" ? Math.max(1, schema.minItems) : 1;
      return Array.from({ length: Math.min(count, 10) }, () => next(schema.items ?? {}));
    }
    case "integer":
    case "number":
      return typeof schema.minimum === "number" ? schema.minimum : 1;
    case "boolean":
      return true;
    case "null":
      return null;
    default:
      return reply;
  }
}

/** `#/$defs/name` and `#/definitions/name`, the local references schema generators write. */
function resolveRef(ref: string, root: Record<string, unknown>): unknown {
  let node: unknown = root;
  for (const segment of ref.replace(/^#\/?/, "").split("/")) {
    if (segment === "") continue;
    if (!isJsonObject(node)) return undefined;
    node = node[segment.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  return node;
}
