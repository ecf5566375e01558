import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import { ConfigError } from "./config-error.js";
import { configSchema, type Config } from "./config-schema.js";
import { tracingFromEnv } from "./tracing-env.js";
import type { TracingOptions } from "../tracing/tracing-options.js";

/** The embedded defaults: demo channel, SQLite store, demo key. */
export const DEFAULT_CONFIG_FILE = fileURLToPath(
  new URL("../../config/default.yaml", import.meta.url),
);

/** Where a configuration comes from. */
export interface LoadConfigOptions {
  /** A YAML file; default `CONFIG_FILE`, else the embedded {@link DEFAULT_CONFIG_FILE}. */
  file?: string;
  /** The environment for `${VAR}` and the overrides. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** A loaded configuration, the file it came from, and what start-up should warn about. */
export interface LoadedConfig {
  config: Config;
  file: string;
  /** One line per questionable but accepted value (an unset `${VAR}`), naming the field. */
  warnings: string[];
  /** Trace export, from the standard `OTEL_*` variables; undefined: tracing off. */
  tracing: TracingOptions | undefined;
}

/**
 * Reads, substitutes and validates the configuration. The only place that
 * reads `process.env`, so the rest of the service sees one parsed object.
 * @throws ConfigError listing every problem, one line each, naming the field.
 */
export function loadConfig(options: LoadConfigOptions = {}): LoadedConfig {
  const env = options.env ?? process.env;
  const file = options.file ?? (env.CONFIG_FILE || DEFAULT_CONFIG_FILE);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError([`${file}: cannot read (${(err as NodeJS.ErrnoException).code ?? err})`]);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new ConfigError([`${file}: not valid YAML (${(err as Error).message.split("\n")[0]})`]);
  }
  const warnings: string[] = [];
  const problems: string[] = [];
  const tracing = tracingFromEnv(env, problems);
  let config: Config;
  try {
    config = parseConfig(raw ?? {}, env, warnings);
  } catch (err) {
    if (err instanceof ConfigError) throw new ConfigError([...err.problems, ...problems]);
    throw err;
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { config, file, warnings, tracing };
}

/**
 * Validates an already-parsed configuration object: `${VAR}` substitution,
 * environment overrides, defaults.
 * @throws ConfigError listing every problem.
 */
export function parseConfig(
  raw: unknown,
  env: NodeJS.ProcessEnv = {},
  warnings?: string[],
): Config {
  const problems: string[] = [];
  const unset = new Map<string, string>();
  // Which variable set each field: an error names what the user set, not only the field.
  const fromEnv = new Map<string, string>();
  const substituted = substituteEnv(raw, env, [], unset, fromEnv);
  const overridden = applyEnvOverrides(substituted, env, problems);
  // The spec's example must start as written even where its variables are unset: an unset
  // `${VAR}` is an empty value and a warning (an empty JWT secret then refuses every token).
  for (const [path, name] of unset) {
    warnings?.push(
      `${path || "(root)"}: environment variable ${name} is not set or empty; using ""`,
    );
  }
  const result = configSchema.safeParse(substituted);
  if (!result.success) {
    for (const issue of result.error.issues) {
      const path = formatPath(issue.path);
      const hint = unset.get(path);
      if (issue.code === "unrecognized_keys") {
        // One line per unknown field, naming it (`server.prot`), not its section.
        for (const key of issue.keys) {
          problems.push(`${formatPath([...issue.path, key])}: unknown field`);
        }
        continue;
      }
      problems.push(problemLine(path, issue.message, { hint, overridden, fromEnv }));
    }
  }
  if (problems.length > 0 || !result.success) throw new ConfigError(problems);
  return result.data;
}

/**
 * One problem line, naming what the user set: the variable that overrode the
 * field (`LOG_LEVEL: ...`), else the field, with the variable its value came
 * from; a field named in the message that a variable overrode says so too.
 */
function problemLine(
  path: string,
  message: string,
  sources: { hint?: string; overridden: Map<string, string>; fromEnv: Map<string, string> },
): string {
  const { hint, overridden, fromEnv } = sources;
  let text = message;
  for (const [field, name] of overridden) {
    if (field !== path) text = text.replaceAll(field, `${field} (set by ${name})`);
  }
  const variable = overridden.get(path);
  if (variable) return `${variable}: ${text} (the variable overrides ${path})`;
  if (hint) return `${path || "(root)"}: ${text} (environment variable ${hint} is not set)`;
  const source = fromEnv.get(path);
  return `${path || "(root)"}: ${text}${source ? ` (the value comes from ${source})` : ""}`;
}

/** `channels[0].baseUrl`, as users write it. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  return path
    .map((part, index) =>
      typeof part === "number" ? `[${part}]` : `${index === 0 ? "" : "."}${String(part)}`,
    )
    .join("");
}

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/**
 * Replaces `${VAR}` (and `${VAR:-default}`) in string values. Done after YAML
 * parsing so a secret with YAML syntax in it cannot change the document.
 * An unset variable becomes "" and is remembered, so {@link parseConfig} can
 * report it, naming the field and the variable.
 */
function substituteEnv(
  value: unknown,
  env: NodeJS.ProcessEnv,
  path: PropertyKey[],
  unset: Map<string, string>,
  fromEnv: Map<string, string>,
): unknown {
  if (typeof value === "string") {
    return value.replace(VAR, (_match, name: string, fallback: string | undefined) => {
      const found = env[name];
      if (found !== undefined && found !== "") {
        fromEnv.set(formatPath(path), name);
        return found;
      }
      if (fallback !== undefined) return fallback;
      unset.set(formatPath(path), name);
      return "";
    });
  }
  if (Array.isArray(value)) {
    return value.map((item, index) => substituteEnv(item, env, [...path, index], unset, fromEnv));
  }
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [
        key,
        substituteEnv(item, env, [...path, key], unset, fromEnv),
      ]),
    );
  }
  return value;
}

type Raw = Record<string, unknown>;

/** The environment variables the spec lets override the file. */
const OVERRIDES: ReadonlyArray<{ name: string; section: string; field: string; numeric: boolean }> =
  [
    { name: "PORT", section: "server", field: "port", numeric: true },
    { name: "STORE_URL", section: "store", field: "url", numeric: false },
    { name: "IMAGES_URL", section: "images", field: "url", numeric: false },
    { name: "IMAGE_ASYNC_TIMEOUT_SEC", section: "imageTasks", field: "timeoutSec", numeric: true },
    {
      name: "IMAGE_ASYNC_MAX_CONCURRENT",
      section: "imageTasks",
      field: "maxConcurrent",
      numeric: true,
    },
    { name: "LOG_LEVEL", section: "logging", field: "level", numeric: false },
    { name: "LOG_FORMAT", section: "logging", field: "format", numeric: false },
    { name: "WEBHOOKS_SECRET", section: "webhooks", field: "secret", numeric: false },
    {
      name: "WEBHOOKS_ALLOW_PRIVATE_NETWORKS",
      section: "webhooks",
      field: "allowPrivateNetworks",
      numeric: false,
    },
  ];

/** Applies the overrides that are set; resolves each overridden field's path and its variable. */
function applyEnvOverrides(
  raw: unknown,
  env: NodeJS.ProcessEnv,
  problems: string[],
): Map<string, string> {
  const applied = new Map<string, string>();
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return applied;
  const root = raw as Raw;
  for (const { name, section, field, numeric } of OVERRIDES) {
    const value = env[name];
    if (value === undefined || value === "") continue;
    if (numeric && !/^\d+$/.test(value.trim())) {
      problems.push(`${name}: must be a whole number`);
      continue;
    }
    const current = root[section];
    const target: Raw = current && typeof current === "object" ? (current as Raw) : {};
    target[field] = numeric ? Number(value.trim()) : value;
    root[section] = target;
    applied.set(`${section}.${field}`, name);
  }
  return applied;
}
