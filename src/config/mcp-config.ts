import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { ConfigError } from "./config-error.js";

/** Settings of the stdio MCP server (`image-task-sidecar mcp`), read from its environment. */
export interface McpConfig {
  /** The service's `/v1` base URL, without a trailing slash. */
  apiBaseUrl: string;
  /** Bearer key sent to the service; without it every call fails with a clear tool error. */
  apiKey: string | undefined;
  /** Absolute directory the images are saved into. */
  outputDir: string;
}

const DEFAULT_OUTPUT_DIR = "./generated-images";

const optionalString = z
  .string()
  .optional()
  .transform((value) => {
    const trimmed = value?.trim();
    return trimmed === "" ? undefined : trimmed;
  });

const envSchema = z.object({
  OPENAI_BASE_URL: optionalString.pipe(
    z
      .string({
        error: "is required: set it to the service's /v1 URL, e.g. http://localhost:8080/v1",
      })
      .refine((value) => isHttpUrl(value), {
        message: "must be an http(s) URL such as http://localhost:8080/v1",
      }),
  ),
  OPENAI_API_KEY: optionalString,
  IMAGE_OUTPUT_DIR: optionalString,
});

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}

/**
 * Reads the MCP server's settings so that the rest of `src/mcp` never touches `process.env`.
 * Throws a {@link ConfigError} with one line per bad variable, like the service's own
 * configuration, so the CLI reports both the same way (exit 2) and the user fixes all at once.
 */
export function loadMcpConfig(env: NodeJS.ProcessEnv): McpConfig {
  const parsed = envSchema.safeParse({
    OPENAI_BASE_URL: env.OPENAI_BASE_URL,
    OPENAI_API_KEY: env.OPENAI_API_KEY,
    IMAGE_OUTPUT_DIR: env.IMAGE_OUTPUT_DIR,
  });
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`),
    );
  }
  const { OPENAI_BASE_URL, OPENAI_API_KEY, IMAGE_OUTPUT_DIR } = parsed.data;
  const url = new URL(OPENAI_BASE_URL);
  url.search = "";
  url.hash = "";
  return {
    apiBaseUrl: url.href.replace(/\/+$/, ""),
    apiKey: OPENAI_API_KEY,
    outputDir: resolveOutputDir(IMAGE_OUTPUT_DIR ?? DEFAULT_OUTPUT_DIR),
  };
}

/** Editors start MCP servers in odd working directories: expand `~` and make the path absolute. */
function resolveOutputDir(dir: string): string {
  if (dir === "~") return os.homedir();
  if (dir.startsWith("~/") || dir.startsWith("~\\")) return path.join(os.homedir(), dir.slice(2));
  return path.resolve(dir);
}
