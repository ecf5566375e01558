import type { Logger } from "pino";

/**
 * BullMQ reports each failed reconnect as an `error` event (and an unheard
 * one would crash the process): log one line per outage, at most a minute apart.
 */
export function logQueueOutages(
  emitter: { on(event: "error", listener: (err: Error) => void): unknown },
  logger: Logger,
  component: string,
): void {
  let last = 0;
  emitter.on("error", (err: Error) => {
    if (Date.now() - last < 60_000) return;
    last = Date.now();
    logger.warn({ err: err.message, component }, "queue error");
  });
}
