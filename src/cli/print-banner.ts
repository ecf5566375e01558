import type { Config } from "../config/config-schema.js";
import { redactUrl } from "../logging/redact-url.js";
import { describeAuth } from "./describe-auth.js";

/**
 * The start-up banner on stdout. Keys are shown only for the embedded demo
 * configuration, whose key is public by design; a real config's keys never
 * reach the console or a log, and URLs show their credentials masked.
 */
export function formatBanner(options: {
  url: string;
  config: Config;
  demo: boolean;
  configFile: string;
}): string {
  const { url, config, demo } = options;
  const { host } = config.server;
  const everywhere = ["0.0.0.0", "::", ""].includes(host);
  const lines = [
    "",
    `  image-task-sidecar is listening on ${url}`,
    everywhere
      ? `  binds ${host || "0.0.0.0"}: every interface of this machine`
      : `  binds ${host} only; set server.host (HOST for the demo defaults) to 0.0.0.0 for every interface`,
    `  OpenAI base URL: ${url}/v1`,
    ...(config.console.enabled ? [`  Web console: ${url}/console/`] : []),
    `  config: ${options.configFile}   store: ${redactUrl(config.store.url)}`,
    `  ${describeAuth(config.auth)}`,
  ];
  const key = config.auth.keys[0]?.key;
  if (demo && key) {
    lines.push(
      `  demo key: ${key}`,
      "",
      "  Try it:",
      `    curl -s ${url}/v1/models -H "Authorization: Bearer ${key}"`,
      `    curl -s ${url}/v1/images/tasks -H "Authorization: Bearer ${key}" \\`,
      `      -d '{"model":"gpt-image-1","prompt":"a lighthouse at dawn","response_format":"url"}'`,
    );
  }
  lines.push("");
  return lines.join("\n");
}

/**
 * The banner as the fields of a JSON log line (`msg: started`): where to
 * reach the service, with credentials in URLs masked. No key, not even the
 * demo's: a log line is read by more people than a terminal.
 */
export function bannerFields(options: {
  url: string;
  config: Config;
  configFile: string;
}): Record<string, string> {
  const { url, config } = options;
  return {
    url,
    base_url: `${url}/v1`,
    ...(config.console.enabled ? { console_url: `${url}/console/` } : {}),
    host: config.server.host || "0.0.0.0",
    config: options.configFile,
    store: redactUrl(config.store.url),
    auth: describeAuth(config.auth),
  };
}

/** A start or stop of the process as a JSON line in pino's shape (`level` 30, `time`, `msg`). */
export function lifecycleLine(msg: string, fields: Record<string, string>): string {
  return JSON.stringify({ level: 30, time: Date.now(), pid: process.pid, ...fields, msg });
}
