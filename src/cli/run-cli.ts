import { parseArgs } from "node:util";
import type { Logger } from "pino";
import { ConfigError } from "../config/config-error.js";
import type { Config } from "../config/config-schema.js";
import type { TracingOptions } from "../tracing/tracing-options.js";
import { DEFAULT_CONFIG_FILE, loadConfig } from "../config/load-config.js";
import { loadMcpConfig } from "../config/mcp-config.js";
import { createLogger } from "../logging/create-logger.js";
import { configSecrets, createSecretScrubber, envSecrets } from "../logging/secret-scrubber.js";
import { describeAuth } from "./describe-auth.js";
import { bannerFields, formatBanner, lifecycleLine } from "./print-banner.js";

const USAGE = `Usage: image-task-sidecar <command> [--config FILE]

Commands:
  serve          start the HTTP service (default); CONFIG_FILE or --config picks the YAML file
  mcp            run the MCP server over stdio (OPENAI_BASE_URL, OPENAI_API_KEY, IMAGE_OUTPUT_DIR)
  check-config   validate a configuration file and exit (0 valid, 2 invalid); with --probe
                 also check the channels, the task store and the image store as start-up
                 does, one line each (exit 1 when one fails)
`;

/** A started service, as `serve` handles it: its URL for the banner, and its graceful stop. */
export interface ServingProcess {
  url: string;
  close(): Promise<void>;
}

/** One line of `check-config --probe`. */
export interface ProbeLine {
  ok: boolean;
  line: string;
}

/** What the CLI runs: the service's `startServer` and its probes, passed in by the entry files. */
export interface CliDeps {
  startServer(options: {
    config: Config;
    logger: Logger;
    tracing: TracingOptions | undefined;
  }): Promise<ServingProcess>;
  /** `check-config --probe`: start-up's checks without starting (see `probe/probe-config.ts`). */
  probeConfig?(config: Config, logger: Logger): Promise<ProbeLine[]>;
}

/**
 * The CLI behind the package bin and `npm start`. Resolves the exit code for
 * commands that end (2 for a bad configuration); `serve` and `mcp` resolve
 * only when they stop.
 */
export async function runCli(
  argv: string[],
  env: NodeJS.ProcessEnv,
  deps: CliDeps,
): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        config: { type: "string", short: "c" },
        help: { type: "boolean", short: "h" },
        probe: { type: "boolean" },
      },
    });
  } catch (err) {
    console.error(`${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const command = parsed.positionals[0] ?? "serve";
  if (parsed.values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const file = parsed.values.config;
  try {
    switch (command) {
      case "serve":
        return await serve(file, env, deps);
      case "check-config": {
        const loaded = loadConfig({ file, env });
        printWarnings(loaded.warnings);
        process.stdout.write(`${loaded.file}: valid\n${describeAuth(loaded.config.auth)}\n`);
        return parsed.values.probe ? await probe(loaded.config, env, deps) : 0;
      }
      case "mcp":
        // Loaded here, not at start-up: `serve` never needs the stdio server.
        await (await import("../mcp/run-mcp-stdio.js")).runMcpStdio(loadMcpConfig(env));
        return 0;
      default:
        console.error(`Unknown command: ${command}\n\n${USAGE}`);
        return 2;
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      for (const problem of err.problems) console.error(problem);
      return 2;
    }
    throw err;
  }
}

async function serve(
  file: string | undefined,
  env: NodeJS.ProcessEnv,
  deps: CliDeps,
): Promise<number> {
  const { config, file: configFile, warnings, tracing } = loadConfig({ file, env });
  printWarnings(warnings);
  // What this process prints is searched for the config's and the environment's credentials,
  // whichever message (a library's error, a crash) would carry one.
  const secrets = [...configSecrets(config), ...envSecrets(env)];
  const scrub = createSecretScrubber(secrets);
  const printError = (err: unknown) =>
    console.error(scrub(err instanceof Error ? (err.stack ?? err.message) : String(err)));
  process.on("uncaughtException", (err) => {
    printError(err);
    process.exit(1);
  });
  const logger = createLogger(config.logging.level, undefined, secrets);
  // Among JSON lines (a log collector reading stdout), the banner and the shutdown are lines too.
  const json = (config.logging.format ?? (process.stdout.isTTY ? "pretty" : "json")) === "json";
  let server: ServingProcess;
  try {
    server = await deps.startServer({ config, logger, tracing });
  } catch (err) {
    if (err instanceof ConfigError) {
      for (const problem of err.problems) console.error(scrub(problem));
      return 2;
    }
    console.error(scrub(err instanceof Error ? err.message : String(err)));
    return 1;
  }
  // Written whatever `logging.level` says (a person or a collector must see them), through the
  // same scrubbing as every line.
  const line = (msg: string, fields: Record<string, string>) =>
    process.stdout.write(`${scrub(lifecycleLine(msg, fields))}\n`);
  // The signals are heard before the banner says the service is up: whoever waits for that line
  // (a supervisor, a test) may send SIGTERM at once, and a process descheduled between the line
  // and the handlers would die of it, undrained.
  const exited = untilStopped(server, { json, line, printError });
  const banner = { url: server.url, config, demo: configFile === DEFAULT_CONFIG_FILE, configFile };
  if (json) line("started", bannerFields(banner));
  else process.stdout.write(`${formatBanner(banner)}\n`);
  return exited;
}

/**
 * Resolves the exit code once a signal stopped the service: SIGTERM (maybe
 * twice: npm and process managers forward it) drains it, then 0 (1 when the
 * drain failed); SIGINT once drains, twice exits at once (130).
 */
function untilStopped(
  server: ServingProcess,
  out: {
    json: boolean;
    line: (msg: string, fields: Record<string, string>) => void;
    printError: (err: unknown) => void;
  },
): Promise<number> {
  const { json, line, printError } = out;
  const say = (signal: string, text: string, msg: string) =>
    json ? line(msg, { signal }) : process.stdout.write(`${signal}: ${text}\n`);
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      say(signal, "finishing in-flight work, then exiting", "stopping");
      server.close().then(
        () => {
          if (json) line("stopped", { signal });
          resolve(0);
        },
        (err: unknown) => {
          printError(err);
          resolve(1);
        },
      );
    };
    process.on("SIGTERM", () => stop("SIGTERM"));
    // A person pressing Ctrl-C twice wants out now.
    let interrupts = 0;
    process.on("SIGINT", () => {
      if (++interrupts > 1) {
        say("SIGINT", "again: exiting without waiting", "stopped without waiting");
        resolve(130);
        return;
      }
      stop("SIGINT");
    });
  });
}

/** `check-config --probe`: one line per check, `ok` or `failed`; 1 when one failed. */
async function probe(config: Config, env: NodeJS.ProcessEnv, deps: CliDeps): Promise<number> {
  if (!deps.probeConfig) throw new Error("this entry cannot probe");
  const scrub = createSecretScrubber([...configSecrets(config), ...envSecrets(env)]);
  const results = await deps.probeConfig(config, createLogger("silent"));
  for (const { ok, line } of results) {
    process.stdout.write(`${ok ? "ok    " : "failed"}  ${scrub(line)}\n`);
  }
  return results.every((result) => result.ok) ? 0 : 1;
}

function printWarnings(warnings: readonly string[]): void {
  for (const warning of warnings) console.error(`warning: ${warning}`);
}
