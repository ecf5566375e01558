import { pino, type Logger } from "pino";
import { createSecretScrubber } from "./secret-scrubber.js";

/** Characters of log lines held before they go to stdout: one write per few lines, not one per line. */
const BUFFER_CHARS = 16 * 1024;
/** The longest a held line waits (a quiet service still shows every line at once, nearly). */
const FLUSH_EVERY_MS = 500;

/**
 * Lines held until they fill {@link BUFFER_CHARS}, then written at once.
 * Sonic-boom's own `minLength` buffering measures the whole held text on
 * every write (`Buffer.byteLength` of a growing string, flattened each
 * time): at 4 KiB that cost more than the access line itself.
 */
class LineBatch {
  private lines: string[] = [];
  private chars = 0;

  constructor(private readonly out: pino.DestinationStream & { flushSync(): void }) {}

  write(line: string): void {
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= BUFFER_CHARS) this.flush();
  }

  /** Writes the held lines, in one write. */
  flush(): void {
    if (this.chars === 0) return;
    const text = this.lines.join("");
    this.lines = [];
    this.chars = 0;
    this.out.write(text);
  }

  /** Writes everything now (the process is exiting). */
  flushSync(): void {
    try {
      this.flush();
      this.out.flushSync();
    } catch {
      // Stdout closed (EPIPE) or the file never opened: nothing more can be written.
    }
  }
}

/** Every batch in use, flushed when the process exits (weakly held: a test's loggers may go). */
const batches = new Set<WeakRef<LineBatch>>();
let exitHooked = false;

function flushAllAtExit(): void {
  for (const ref of batches) ref.deref()?.flushSync();
}

/**
 * Stdout (or `dest`, a file) as the service's log lines go to it: held up
 * to 16 KiB or half a second, since a write of its own for each access line
 * costs more than the line; flushed when the process exits (a SIGKILL loses
 * at most that much).
 */
export function createStdoutDestination(dest: number | string = 1): pino.DestinationStream {
  // Synchronous, as pino's own stdout is: one write per 16 KiB batch costs the event loop
  // less than handing each to the thread pool, and an exit never leaves a write in flight.
  const out = pino.destination({ dest, sync: true });
  const batch = new LineBatch(out);
  if (!exitHooked) {
    exitHooked = true;
    process.once("exit", flushAllAtExit);
  }
  const ref = new WeakRef(batch);
  batches.add(ref);
  const timer = setInterval(() => {
    const held = ref.deref();
    if (held) return held.flush();
    clearInterval(timer);
    batches.delete(ref);
  }, FLUSH_EVERY_MS).unref();
  return batch;
}

/**
 * Fields replaced by `[redacted]` wherever a line names them. The code never
 * logs a credential; these catch one a library or an error object carries.
 */
export const REDACTED_PATHS: readonly string[] = [
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
];

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
        paths: [...REDACTED_PATHS],
        censor: "[redacted]",
      },
    },
    destination ?? createStdoutDestination(),
  );
}
