import { z } from "zod";

/**
 * `${VAR}` is substituted into the parsed YAML as text, so `port: ${PORT}`
 * arrives as "8080": numbers and booleans are also read from such text.
 */
export const fromText = <T extends z.ZodType>(schema: T) =>
  z.preprocess((value) => {
    if (typeof value !== "string") return value;
    const text = value.trim();
    if (/^-?\d+(\.\d+)?$/.test(text)) return Number(text);
    if (text === "true" || text === "false") return text === "true";
    return value;
  }, schema);

export const positiveInt = (field: string) =>
  fromText(
    z
      .number({ error: `must be a number (${field})` })
      .int("must be an integer")
      .positive("must be > 0"),
  );

/** A TCP port to listen on; 0 picks a free one. */
export const portNumber = fromText(
  z
    .number({ error: "must be a number" })
    .int("must be an integer")
    .min(0, "must be between 0 and 65535")
    .max(65535, "must be between 0 and 65535"),
);

export const modelPatterns = z
  .array(z.string().min(1, "must not be empty"), { error: "must be a list of model ids or globs" })
  .min(1, "must list at least one model id or glob");

export const url = z.string({ error: "must be a URL" }).refine((value) => {
  try {
    const parsed = new URL(value);
    return parsed.protocol === "http:" || parsed.protocol === "https:";
  } catch {
    return false;
  }
}, "must be a URL");

/** An http(s) origin (scheme, host, port; no path), kept in its normalised form. */
export const origin = z
  .string({ error: "must be an http(s) origin" })
  .refine((value) => {
    try {
      const parsed = new URL(value);
      return (
        (parsed.protocol === "http:" || parsed.protocol === "https:") &&
        parsed.pathname === "/" &&
        !parsed.search &&
        !parsed.hash &&
        !parsed.username &&
        !parsed.password
      );
    } catch {
      return false;
    }
  }, "must be an http(s) origin such as https://cdn.example.com (no path)")
  .transform((value) => new URL(value).origin);
