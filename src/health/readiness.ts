import { redactUrlsIn } from "../logging/redact-url.js";
import type { PartHealth } from "./part-health.js";

/** What `/readyz` reads: state the periodic checks keep, never a store or a channel itself. */
export interface ReadinessDeps {
  /** The task store's and the image store's last checks (see `tasks/task-health.ts`). */
  store: Pick<PartHealth, "current">;
  images: Pick<PartHealth, "current">;
  /** Each channel's last model-list check (see `channel-checks.ts`); reported, never fatal. */
  channels: () => Record<string, string>;
  /** True once the service is shutting down. */
  isStopping: () => boolean;
  /** True until the service has started (tasks a previous process left picked up). Default: started. */
  isStarting?: () => boolean;
}

/** The body of `/readyz`. */
export interface ReadinessBody {
  /**
   * `ready`: everything works; `degraded`: passthrough works but a part the
   * tasks need does not (its reason in `checks`); `unavailable`: this replica
   * can serve nothing (starting, shutting down).
   */
  status: "ready" | "degraded" | "unavailable";
  /** Why it is unavailable, when it is. */
  reason?: string;
  checks: {
    store: string;
    images: string;
    channels: Record<string, string>;
  };
}

/**
 * Whether this replica can serve. It reads what the periodic checks last
 * found and calls nothing itself, so an unauthenticated caller polling it as
 * fast as it likes costs the stores and the channels nothing.
 *
 * 503 `unavailable` only when the replica can serve nothing: starting or
 * shutting down. A task store or image store that is down keeps it ready
 * (`degraded`, 200): passthrough still works, and the task routes answer 503
 * `store_unavailable` / `storage_unavailable` themselves; a balancer that
 * took the replica out would lose what still works, on every replica at once
 * since they share the stores. A channel alone never makes it 503 either (it
 * is reported, as `channel_up` is). No address, version or endpoint of a
 * store is shown (they are on the metrics listener), and any URL a reason
 * quotes has its credentials masked.
 */
export function readiness(deps: ReadinessDeps): { status: 200 | 503; body: ReadinessBody } {
  const checks = {
    store: shown(deps.store.current()),
    images: shown(deps.images.current()),
    channels: Object.fromEntries(
      Object.entries(deps.channels()).map(([name, status]) => [name, shown(status)]),
    ),
  };
  const reason = deps.isStopping()
    ? "the service is shutting down"
    : deps.isStarting?.()
      ? "the service is starting"
      : undefined;
  if (reason) return { status: 503, body: { status: "unavailable", reason, checks } };
  const degraded = checks.store !== "ok" || checks.images !== "ok";
  return { status: 200, body: { status: degraded ? "degraded" : "ready", checks } };
}

/** A part's last state as shown: `ok` before any check (start-up checked it), URLs masked. */
function shown(status: string | undefined): string {
  return status === undefined || status === "ok" ? "ok" : redactUrlsIn(status);
}
