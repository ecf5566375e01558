// `npm start`: the service on CONFIG_FILE, or on the embedded demo defaults.
import { runCli } from "./cli/run-cli.js";
import { startServer } from "./server.js";

runCli(["serve", ...process.argv.slice(2)], process.env, { startServer }).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
