import { z } from "zod";
import { configSchema } from "./config-schema.js";

/** A JSON Schema node, as far as this file reads and writes it. */
export type JsonSchema = { [keyword: string]: unknown };

/**
 * A string that `${VAR}` substitution turns into the value at start-up: where
 * a number, a boolean or a constrained string is expected, editors must not
 * flag `port: ${PORT}`.
 */
export const ENV_REFERENCE: JsonSchema = {
  type: "string",
  pattern: "\\$\\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\\}",
  description: "A `${VAR}` or `${VAR:-default}` reference, replaced at start-up.",
};

/** Where {@link ENV_REFERENCE} sits in the generated schema. */
const ENV_REFERENCE_REF = { $ref: "#/definitions/envReference" };

/** Keywords that stay on a widened node rather than move into its first `anyOf` branch. */
const ANNOTATIONS = ["title", "description", "default"];

/** The bounds `z.number().int()` adds, which say nothing to a reader. */
const SAFE_BOUNDS: Record<string, number> = {
  minimum: Number.MIN_SAFE_INTEGER,
  maximum: Number.MAX_SAFE_INTEGER,
};

/**
 * The configuration file's JSON Schema (draft-07, which editors' YAML and JSON
 * language servers read), from the zod schema the service validates with:
 * the file as written (defaults optional), each field's description and
 * default, and `${VAR}` references accepted wherever a value that is not free
 * text is expected. The cross-field rules (a key's group exists, exactly one
 * of `jwt.secret` and `jwt.jwksUrl`, ...) are checked at start-up only.
 */
export function configJsonSchema(): JsonSchema {
  const schema = z.toJSONSchema(configSchema, {
    target: "draft-07",
    io: "input",
    override: ({ zodSchema, jsonSchema }) => {
      // The file is read as input, where zod drops the defaults of fields that
      // take their value as text too (`fromText`); they are the file's defaults still.
      const def = (zodSchema as unknown as { _zod: { def: Record<string, unknown> } })._zod.def;
      if (def.type === "default" && jsonSchema.default === undefined) {
        const value = def.defaultValue;
        jsonSchema.default = typeof value === "function" ? value() : value;
      }
    },
  }) as JsonSchema;
  return { ...widen(schema), definitions: { envReference: ENV_REFERENCE } };
}

/** Walks the schema: drops the integer bounds, accepts `${VAR}` where text is not free. */
function widen(node: JsonSchema): JsonSchema {
  const out: JsonSchema = {};
  for (const [keyword, value] of Object.entries(node)) {
    if (SAFE_BOUNDS[keyword] === value) continue;
    out[keyword] = walk(keyword, value);
  }
  if (!takesReference(out)) return out;
  const annotations: JsonSchema = {};
  const value: JsonSchema = {};
  for (const [keyword, item] of Object.entries(out)) {
    (ANNOTATIONS.includes(keyword) ? annotations : value)[keyword] = item;
  }
  return { ...annotations, anyOf: [value, ENV_REFERENCE_REF] };
}

function walk(keyword: string, value: unknown): unknown {
  if (keyword === "default" || keyword === "enum" || keyword === "const") return value;
  if (Array.isArray(value)) return value.map((item) => walk("", item));
  if (value && typeof value === "object") {
    if (keyword === "properties" || keyword === "definitions" || keyword === "$defs") {
      return Object.fromEntries(
        Object.entries(value).map(([name, item]) => [name, widen(item as JsonSchema)]),
      );
    }
    return widen(value as JsonSchema);
  }
  return value;
}

/** A value a `${VAR}` can stand for, and the schema would refuse as text. */
function takesReference(node: JsonSchema): boolean {
  if (node.type === "integer" || node.type === "number" || node.type === "boolean") return true;
  if (node.type !== "string") return false;
  return (
    node.enum !== undefined ||
    node.pattern !== undefined ||
    node.format !== undefined ||
    (typeof node.minLength === "number" && node.minLength > 4) ||
    node.maxLength !== undefined
  );
}
