import { pino, type Logger } from "pino";
import { createSecretScrubber } from "./secret-scrubber.js";

/**
 * The service's logger: JSON lines on stderr-free stdout (pino's default).
 * The code itself never logs keys (configured, channel or forward),
 * Authorization headers or other credentials; under that, fields that could
 * hold one are redacted, and every line is searched for `secrets` (the
 * configuration's credentials: see `configSecrets`), whatever field or
 * message a library put them in.
 */
export function createLogger(
  level: string,
  destination?: pino.DestinationStream,
  secrets: readonly string[] = [],
): Logger {
  const scrub = createSecretScrubber(secrets);
  return pino(
    {
      level,
      base: { service: "image-task-sidecar" },
      hooks: { streamWrite: scrub },
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
          // Whatever else is named like a secret.
          "password",
          "*.password",
          "secret",
          "*.secret",
          "token",
          "*.token",
          "bearerToken",
          "*.bearerToken",
          "secretAccessKey",
          "*.secretAccessKey",
        ],
        censor: "[redacted]",
      },
    },
    destination,
  );
}
