// The service as an operator runs it: the built dist/ (argv[2], a directory) started with a
// configuration file (argv[3]), in a process of its own. Answers IPC `stats` (CPU time and
// memory) and `gc` (the same after two garbage collections, when run with --expose-gc:
// memory the service holds, not garbage it has not collected yet); `stop` closes it.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { answerMessages, exitWithParent } from "./children.mjs";

const dist = pathToFileURL(`${resolve(process.argv[2])}/`);
const { loadConfig } = await import(new URL("config/load-config.js", dist).href);
const { startServer } = await import(new URL("server.js", dist).href);
const { createLogger } = await import(new URL("logging/create-logger.js", dist).href);
const { pino } = await import("pino");

// No environment overrides (PORT, STORE_URL, LOG_LEVEL...): the file says it all, besides the
// variables a variant sets (OTEL_*). Log lines go to a file, synchronously, as pino writes stdout.
const options = JSON.parse(process.argv[4] ?? "{}");
const { config, tracing } = loadConfig({ file: process.argv[3], env: options.env ?? {} });
const logger = createLogger(
  config.logging.level,
  options.logFile ? pino.destination({ dest: options.logFile, sync: true }) : undefined,
);
const running = await startServer({ config, logger, tracing });

const stats = () => ({ cpu: process.cpuUsage(), memory: process.memoryUsage() });
const collect = () =>
  new Promise((done) => {
    globalThis.gc?.();
    // Array buffers freed by a collection are swept in the background.
    setTimeout(() => {
      globalThis.gc?.();
      done();
    }, 20);
  });

exitWithParent(() => running.close(200));
answerMessages({ stats, gc: async () => (await collect(), stats()) });
process.send({ url: running.url });
