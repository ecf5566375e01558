import type { ServerResponse } from "node:http";

/**
 * Aborts when the client goes away before its answer was sent. A response
 * that was sent also ends with `close`: that one aborts nothing, since an
 * abort costs a DOMException (a stack capture) on every request for no one.
 */
export function clientGone(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}
