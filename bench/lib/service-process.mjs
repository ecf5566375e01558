// The service as an operator runs it: the built dist/ (argv[2], a directory) started with a
// configuration file (argv[3]), in a process of its own. Answers IPC `stats` (CPU time and
// memory) and `gc` (the same after two garbage collections, when run with --expose-gc:
// memory the service holds, not garbage it has not collected yet); `stop` closes it.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { answerMessages, exitWithParent, statsHandlers } from "./children.mjs";

// As the service's entries (main.ts, cli.ts) do: Node 20 is supported, the AWS SDK's notice is noise.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
const dist = pathToFileURL(`${resolve(process.argv[2])}/`);
const { loadConfig } = await import(new URL("config/load-config.js", dist).href);
const { startServer } = await import(new URL("server.js", dist).href);
const logging = await import(new URL("logging/create-logger.js", dist).href);
const secretScrubber = await import(new URL("logging/secret-scrubber.js", dist).href).catch(
  () => ({}),
);

// No environment overrides (PORT, STORE_URL, LOG_LEVEL...): the file says it all, besides the
// variables a variant sets (OTEL_*). Log lines go to a file, as the service writes stdout.
const options = JSON.parse(process.argv[4] ?? "{}");
const { config, tracing } = loadConfig({ file: process.argv[3], env: options.env ?? {} });
// As the service writes stdout, to a file (a build before createStdoutDestination: unbuffered).
const destination = options.logFile
  ? (logging.createStdoutDestination?.(options.logFile) ??
    (await import("pino")).pino.destination({ dest: options.logFile, sync: false }))
  : undefined;
// With the configuration's credentials, as the bin gives them (run-cli.ts): every line is then
// searched for them, as in production (a build without the scrubber: none).
const secrets = secretScrubber.configSecrets?.(config) ?? [];
const logger = logging.createLogger(config.logging.level, destination, secrets);
const running = await startServer({ config, logger, tracing });

exitWithParent(() => running.close(200));
answerMessages(statsHandlers);
process.send({ url: running.url });
