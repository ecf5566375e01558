import type { lookup as dnsLookup } from "node:dns";
import type { Logger } from "pino";
import { fetch as undiciFetch, type Agent } from "undici";
import type { WebhooksConfig } from "../config/config-schema.js";
import { NOOP_SPAN, NOOP_TRACER, traceIdOf, type Span, type Tracer } from "../tracing/tracer.js";
import type { Metrics } from "../metrics/create-metrics.js";
import { assertUrlAllowed, ForbiddenAddressError } from "../net/address-policy.js";
import { createGuardedAgent } from "../net/create-guarded-agent.js";
import { readCappedBody } from "../net/read-capped-body.js";
import { createConcurrencyLimit, type ConcurrencyLimit } from "./concurrency-limit.js";
import {
  nextStep,
  outcomeOfStatus,
  type AttemptOutcome,
  type NextStep,
} from "./delivery-policy.js";
import { signWebhook } from "./sign-webhook.js";
import type { WebhookDelivery } from "./webhook-delivery.js";
import { webhookSigningKey } from "../config/schema/webhook-secret.js";

/** Most of a receiver's answer read (then dropped), so its connection can be reused. */
const MAX_RESPONSE_BYTES = 16 * 1024;
/** How long a receiver's answer is read after its status, at most (then its connection dropped). */
const AFTER_STATUS_MS = 1000;

/** What one attempt did, for the queue (`next`), logs and tests. */
export interface WebhookAttemptReport {
  /** The attempt's number, 1 for the first. */
  attempt: number;
  outcome: AttemptOutcome;
  /** The receiver's HTTP status, when it answered. */
  status?: number;
  /** From sending to the status line, or to the failure. */
  latencyMs: number;
  /** A short reason for logs: `status 500`, `ECONNREFUSED`, the refused address. */
  detail: string;
  /** Retry after `delayMs`, or stop with a result; from {@link nextStep}. */
  next: NextStep;
}

/** Delivers one attempt of a {@link WebhookDelivery} at a time, bounded and timed. */
export interface WebhookDeliverer {
  /**
   * Makes attempt number `attempt` (1-based) of `delivery`: signs the payload
   * with this attempt's timestamp, POSTs it through the address guard with no
   * redirect followed, and classifies the answer. Never rejects for anything a
   * receiver does; rejects only with `signal`'s reason when the caller aborts
   * (a stop, which should not count as an attempt).
   *
   * Waits for a free slot first (at most `webhooks.maxConcurrent` attempts in
   * flight); `webhooks.timeoutSec` counts from when the attempt starts.
   */
  attempt(
    delivery: WebhookDelivery,
    attempt: number,
    options?: { signal?: AbortSignal },
  ): Promise<WebhookAttemptReport>;
  /** Attempts in flight now and waiting for a slot. */
  readonly load: { active: number; waiting: number };
  /** Lets attempts in flight finish, then closes the connections. */
  close(): Promise<void>;
}

/** What {@link createWebhookDeliverer} needs. */
export interface WebhookDelivererDeps {
  config: WebhooksConfig;
  metrics?: Pick<
    Metrics,
    "webhookAttempts" | "webhookAttemptDuration" | "webhookDeliveries" | "webhookDeliveryAttempts"
  >;
  logger?: Logger;
  /** DNS lookup under the connect-time guard; default `node:dns`. Tests pass one to fake DNS. */
  lookup?: typeof dnsLookup;
  /** A span per attempt, in the task's trace. Default: tracing off. */
  tracer?: Tracer;
}

/**
 * The webhook sender: one pooled, guarded undici agent (every connect checks
 * the address it reaches against the policy, so DNS rebinding gains nothing)
 * and a concurrency limit, shared by all attempts. Each attempt has its own
 * deadline and never waits on another attempt's receiver, only for a slot.
 */
export function createWebhookDeliverer(deps: WebhookDelivererDeps): WebhookDeliverer {
  const { config } = deps;
  const timeoutMs = config.timeoutSec * 1000;
  const policy = { allowPrivateNetworks: config.allowPrivateNetworks };
  const agent = createGuardedAgent({
    ...policy,
    lookup: deps.lookup,
    // The attempt's own deadline decides; undici's timeouts only back it up.
    agent: {
      connectTimeout: timeoutMs,
      headersTimeout: timeoutMs + 5000,
      bodyTimeout: timeoutMs + 5000,
    },
  });
  const limit = createConcurrencyLimit(config.maxConcurrent);
  const s: DelivererState = {
    config,
    metrics: deps.metrics,
    logger: deps.logger,
    key: config.secret ? webhookSigningKey(config.secret) : undefined,
    timeoutMs,
    policy,
    agent,
    limit,
    tracer: deps.tracer ?? NOOP_TRACER,
  };
  return {
    attempt: (delivery, attemptNumber, options = {}) =>
      attempt(s, delivery, attemptNumber, options),
    get load() {
      return { active: limit.active, waiting: limit.waiting };
    },
    close: () => agent.close(),
  };
}

/** What the deliverer's steps share. */
interface DelivererState {
  config: WebhooksConfig;
  metrics: WebhookDelivererDeps["metrics"];
  logger: Logger | undefined;
  /** The signing key; without `webhooks.secret` every attempt is refused. */
  key: Buffer | undefined;
  timeoutMs: number;
  policy: { allowPrivateNetworks: boolean };
  agent: Agent;
  limit: ConcurrencyLimit;
  tracer: Tracer;
}

/** {@link WebhookDeliverer.attempt}: one POST in a slot, reported and recorded. */
async function attempt(
  s: DelivererState,
  delivery: WebhookDelivery,
  attemptNumber: number,
  options: { signal?: AbortSignal },
): Promise<WebhookAttemptReport> {
  return s.limit.run(async () => {
    const started = performance.now();
    let answeredAt: number | undefined;
    const span = startAttemptSpan(s.tracer, delivery, attemptNumber);
    let sent: Awaited<ReturnType<typeof send>>;
    try {
      sent = await send(s, delivery, options.signal, () => {
        answeredAt = performance.now();
      });
    } catch (err) {
      span.setError("stopped");
      span.end();
      throw err;
    }
    span.setAttributes({
      "http.response.status_code": sent.status,
      "image_task.webhook.outcome": sent.outcome,
    });
    if (sent.outcome !== "delivered") span.setError(sent.outcome);
    span.end();
    const latencyMs = Math.round((answeredAt ?? performance.now()) - started);
    const next = nextStep(sent.outcome, attemptNumber, s.config);
    const report: WebhookAttemptReport = {
      attempt: attemptNumber,
      outcome: sent.outcome,
      ...(sent.status === undefined ? {} : { status: sent.status }),
      latencyMs,
      detail: sent.detail,
      next,
    };
    record(s, delivery, report);
    return report;
  }, options.signal);
}

/** An attempt's span, in its task's trace (the receiver's origin only: its URL may hold a token). */
function startAttemptSpan(tracer: Tracer, delivery: WebhookDelivery, attempt: number): Span {
  if (!tracer.enabled) return NOOP_SPAN;
  let host: string | undefined;
  try {
    host = new URL(delivery.url).hostname;
  } catch {
    host = undefined;
  }
  return tracer.startSpan("webhook.deliver", {
    kind: "client",
    parent: delivery.trace,
    attributes: {
      "image_task.id": delivery.taskId,
      "image_task.webhook.event_id": delivery.eventId,
      "image_task.webhook.attempt": attempt,
      "server.address": host,
    },
  });
}

/** One POST: how it ended, and the status when the receiver answered. */
async function send(
  s: DelivererState,
  delivery: WebhookDelivery,
  signal: AbortSignal | undefined,
  answered: () => void,
): Promise<{ outcome: AttemptOutcome; status?: number; detail: string }> {
  const { key, config } = s;
  if (!key) return { outcome: "refused", detail: "no webhooks.secret is configured" };
  let url: URL;
  try {
    url = new URL(delivery.url);
    assertUrlAllowed(url, s.policy);
  } catch (err) {
    return { outcome: "refused", detail: (err as Error).message };
  }
  signal?.throwIfAborted();
  const deadline = new AbortController();
  const timer = setTimeout(
    () => deadline.abort(new Error(`timed out after ${config.timeoutSec} s`)),
    s.timeoutMs,
  );
  const onStop = () => deadline.abort(signal?.reason);
  signal?.addEventListener("abort", onStop, { once: true });
  try {
    const timestamp = Math.floor(Date.now() / 1000);
    const response = await undiciFetch(url, {
      method: "POST",
      body: delivery.payload,
      headers: {
        "content-type": "application/json",
        "user-agent": "image-task-sidecar-webhooks",
        ...signWebhook(key, delivery.eventId, timestamp, delivery.payload),
      },
      dispatcher: s.agent,
      redirect: "manual",
      signal: deadline.signal,
    });
    const status = response.status;
    answered();
    // The status decides; the body is read (capped, a second at most) only so the connection
    // can serve the next attempt: a receiver that never ends it holds the slot a second more.
    const held = setTimeout(() => deadline.abort(new Error("answer held open")), AFTER_STATUS_MS);
    await readCappedBody(response, MAX_RESPONSE_BYTES).catch(() => undefined);
    clearTimeout(held);
    const outcome = outcomeOfStatus(status);
    const detail = outcome === "redirect" ? `status ${status}, not followed` : `status ${status}`;
    return { outcome, status, detail };
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    if (deadline.signal.aborted) {
      return { outcome: "timeout", detail: (deadline.signal.reason as Error).message };
    }
    const refusal = forbiddenAddress(err);
    if (refusal) return { outcome: "refused", detail: refusal.message };
    return { outcome: "network_error", detail: networkDetail(err) };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onStop);
  }
}

/** Counts an attempt (and a delivery it ends) in the metrics, and logs it. */
function record(
  { metrics, logger }: DelivererState,
  delivery: WebhookDelivery,
  report: WebhookAttemptReport,
): void {
  metrics?.webhookAttempts.inc({ outcome: report.outcome });
  metrics?.webhookAttemptDuration.observe({ outcome: report.outcome }, report.latencyMs / 1000);
  // The receiver's URL may carry a token in its path or query: logs get its origin only.
  const fields = {
    task_id: delivery.taskId,
    event_id: delivery.eventId,
    attempt: report.attempt,
    status: report.status,
    outcome: report.outcome,
    receiver: originOf(delivery.url),
    latency_ms: report.latencyMs,
    detail: report.detail,
    trace_id: traceIdOf(delivery.trace),
  };
  if (report.next.action === "retry") {
    logger?.info({ ...fields, retry_in_ms: report.next.delayMs }, "webhook.failed");
    return;
  }
  const { result } = report.next;
  metrics?.webhookDeliveries.inc({ result });
  metrics?.webhookDeliveryAttempts.observe({ result }, report.attempt);
  if (result === "delivered") logger?.info(fields, "webhook.delivered");
  else logger?.warn({ ...fields, gave_up: true, result }, "webhook.failed");
}

/** The guard's refusal, thrown directly or wrapped by fetch in `cause`. */
function forbiddenAddress(err: unknown): ForbiddenAddressError | undefined {
  if (err instanceof ForbiddenAddressError) return err;
  const cause = (err as { cause?: unknown } | null)?.cause;
  return cause instanceof ForbiddenAddressError ? cause : undefined;
}

/** `ECONNREFUSED`, `ENOTFOUND`, ...: what fetch's `cause` says, without the stack. */
function networkDetail(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  if (typeof cause?.code === "string") return cause.code;
  if (typeof cause?.message === "string") return cause.message;
  return err instanceof Error ? err.message : String(err);
}

function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return "(invalid URL)";
  }
}
