import { pino, type Logger } from "pino";
import { createSecretScrubber } from "./secret-scrubber.js";

/** Bytes of log lines stdout takes at once: one write per few lines, not one per line. */
const BUFFER_BYTES = 4096;
/** The longest a buffered line waits (a quiet service still shows every line at once, nearly). */
const FLUSH_EVERY_MS = 500;

/**
 * Stdout (or `dest`, a file) as the service's log lines go to it: buffered
 * up to 4 KiB or half a second, since a write of its own for each access line costs more than the
 * line; flushed when the process exits (a SIGKILL loses at most that much).
 */
export function createStdoutDestination(dest: number | string = 1): pino.DestinationStream {
  const stream = pino.destination({ dest, minLength: BUFFER_BYTES, sync: false });
  setInterval(() => {
    // Nothing buffered, or a write under way: the next tick takes it.
    try {
      stream.flush();
    } catch {
      // "sonic boom is not ready yet": the next tick.
    }
  }, FLUSH_EVERY_MS).unref();
  return stream;
}

/**
 * The service's logger: JSON lines on stdout (see {@link createStdoutDestination}).
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
    destination ?? createStdoutDestination(),
  );
}
