// The package's programmatic API.
export { createApp, type AppDeps } from "./app.js";
export { startServer, type RunningServer, type StartServerOptions } from "./server.js";
export { loadConfig, parseConfig } from "./config/load-config.js";
export { ConfigError } from "./config/config-error.js";
export type { Config, ConfigInput } from "./config/config-schema.js";
export { ServiceError, type ErrorCode } from "./errors/service-error.js";
