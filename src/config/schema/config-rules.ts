import type { z } from "zod";

/** What {@link checkListenersAndKeys} reads of a parsed configuration. */
interface Checked {
  server: { port: number };
  metrics: { port?: number | undefined };
  auth: { keys: ReadonlyArray<{ key: string; group: string }> };
}

/**
 * Rules across fields that would otherwise pass the schema and fail later, or
 * never: `metrics.port` on the service's own port (a bare `EADDRINUSE` at
 * listen), and one key listed twice (which group would it be in?).
 */
export function checkListenersAndKeys(config: Checked, ctx: z.RefinementCtx): void {
  const { port } = config.metrics;
  // 0 picks a free port for each listener: two zeros never collide.
  if (port !== undefined && port !== 0 && port === config.server.port) {
    ctx.addIssue({
      code: "custom",
      path: ["metrics", "port"],
      message:
        `is also server.port (${port}): the metrics listener needs a port of its own; ` +
        "pick another, or leave metrics.port unset to serve /metrics on the service's port",
    });
  }
  const first = new Map<string, { index: number; group: string }>();
  config.auth.keys.forEach(({ key, group }, index) => {
    // An empty key (an unset `${VAR}`) is reported by its own field.
    if (key === "") return;
    const earlier = first.get(key);
    if (!earlier) {
      first.set(key, { index, group });
      return;
    }
    ctx.addIssue({
      code: "custom",
      path: ["auth", "keys", index, "key"],
      message:
        earlier.group === group
          ? `is the same key as auth.keys[${earlier.index}].key: list each key once`
          : `is the same key as auth.keys[${earlier.index}].key, which is in group "${earlier.group}", ` +
            `not "${group}": a key belongs to one group; list it once`,
    });
  });
}
