import { pino, type Logger } from "pino";

/**
 * The service's logger: JSON lines on stderr-free stdout (pino's default),
 * with every field that could hold a credential redacted as a second line of
 * defence; the code itself never logs keys (configured, channel or forward)
 * or Authorization headers.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: "image-task-sidecar" },
      redact: {
        paths: [
          "authorization",
          "apiKey",
          "key",
          "*.authorization",
          "*.apiKey",
          "*.key",
          "headers.authorization",
          "*.headers.authorization",
          // An error or a bound channel one level further down (`err.headers`, `x.channel`).
          "*.*.authorization",
          "*.*.apiKey",
          // A forward key (an UpstreamCredential prints as [redacted] anyway).
          "credential",
          "*.credential",
        ],
        censor: "[redacted]",
      },
    },
    destination,
  );
}
