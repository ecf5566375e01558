import type { PartHealth } from "./part-health.js";

/** What `/readyz` reads. */
export interface ReadinessDeps {
  /** The task store's and the image store's checks: checked again on each call. */
  store: PartHealth;
  images: PartHealth;
  /** Each channel's last model-list check (see `channel-checks.ts`); reported, never fatal. */
  channels: () => Record<string, string>;
  /** True once the service is shutting down. */
  isStopping: () => boolean;
  /** More top-level fields another part reports (the Redis primary's address, say). */
  details?: () => Record<string, unknown>;
}

/** The body of `/readyz`. */
export interface ReadinessBody {
  status: "ready" | "unavailable";
  /** Why it is unavailable, when it is. */
  reason?: string;
  checks: {
    store: string;
    images: string;
    channels: Record<string, string>;
  };
  [more: string]: unknown;
}

/**
 * Whether this replica can take tasks: both stores checked now (probes in
 * flight are shared, each bounded), channels as their last check found them.
 * 503 while the task store or the image store is unavailable, or the service
 * is shutting down; a channel alone never makes it 503 (it is reported, as
 * `channel_up` is): a load balancer cannot route around a gateway every
 * replica shares.
 */
export async function readiness(
  deps: ReadinessDeps,
): Promise<{ status: 200 | 503; body: ReadinessBody }> {
  const stopping = deps.isStopping();
  // A stopping service is not probed: it says what it last knew.
  const [store, images] = stopping
    ? [deps.store.current() ?? "ok", deps.images.current() ?? "ok"]
    : await Promise.all([deps.store.refresh(), deps.images.refresh()]);
  const checks = { store, images, channels: deps.channels() };
  const reason = stopping
    ? "the service is shutting down"
    : store !== "ok"
      ? "the task store is unavailable"
      : images !== "ok"
        ? "the image store is unavailable"
        : undefined;
  const body: ReadinessBody = {
    ...deps.details?.(),
    status: reason ? "unavailable" : "ready",
    ...(reason ? { reason } : {}),
    checks,
  };
  return { status: reason ? 503 : 200, body };
}
