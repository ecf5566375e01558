import { setTimeout as sleep } from "node:timers/promises";

/** A log line as JSON, as the tests' capturing loggers keep them. */
export type LogLine = Record<string, unknown>;

/**
 * The access line of the request whose `X-Request-Id` was `id`, among `lines`
 * (a capturing logger's, still filling): waited for up to 5 s, as a line is
 * written once the answer has gone out.
 */
export async function accessLineOf(lines: readonly LogLine[], id: string): Promise<LogLine> {
  const access = () => lines.filter((line) => line.msg === "request");
  for (let waited = 0; waited < 5000; waited += 20) {
    const found = access().find((line) => line.req_id === id);
    if (found) return found;
    await sleep(20);
  }
  throw new Error(`no access line for ${id}; lines: ${JSON.stringify(access())}`);
}
