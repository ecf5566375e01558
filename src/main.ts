// `npm start`: the service on CONFIG_FILE, or on the embedded demo defaults.
import { runCli } from "./cli/run-cli.js";
import { probeConfig } from "./probe/probe-config.js";
import { startServer } from "./server.js";

// The AWS SDK (s3:// image stores) warns on Node 20 that its releases after January 2027 will
// need Node 22; the release this package depends on runs on Node 20, which the package supports,
// so the notice is ours to act on, not the operator's (see README, "Requirements").
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

runCli(["serve", ...process.argv.slice(2)], process.env, { startServer, probeConfig }).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
