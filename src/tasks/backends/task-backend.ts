import type { KeyValue } from "../../collections/key-value.js";
import type { Logger } from "pino";
import type { ForwardSecretHome } from "../../auth/resolve-forward-secret.js";
import type { Config } from "../../config/config-schema.js";
import type { RedisPrimaryWatch } from "../../redis/redis-primary.js";
import type { ResponseEventLog } from "../core/response-state.js";
import { createMemoryResponseEventLog } from "../events/memory-response-event-log.js";
import type { WebhookJournal, WebhookQueue } from "../../webhooks/webhook-queue.js";
import type { TaskEvents } from "../core/task-events.js";
import type { TaskQueue } from "../core/task-queue.js";
import type { TaskStore } from "../core/task-store.js";
import type { LegacyTaskData } from "../legacy/legacy-task-data.js";

/**
 * Where tasks live and how they reach a run, and what else the kind of store
 * offers: one object per deployment, built by its kind's factory
 * (`memory-backend.ts`, `sqlite-backend.ts`, `redis-backend.ts`), which owns
 * the connection every part shares.
 */
export interface TaskBackend {
  store: TaskStore;
  queue: TaskQueue;
  events: TaskEvents;
  /** Webhook deliveries, apart from the task queue. */
  webhooks: WebhookQueue;
  /**
   * Background responses' stream events, where every process of the
   * deployment reads them: on Redis a capped list per response with a TTL; on
   * the embedded stores, in the process (the only one), bounded.
   */
  responseEvents: ResponseEventLog;
  /**
   * Where the embedded stores keep the in-process webhook queue's pending
   * deliveries (what `webhooks` reads at start-up); undefined on Redis,
   * where BullMQ keeps them.
   */
  webhookJournal?: WebhookJournal;
  /**
   * Small entries with a TTL that every replica must see alike (which channel
   * created a stored response, say), under their own namespace. On Redis they
   * live in Redis with native expiry; on SQLite in the store's key-value
   * table, swept with the tasks; on the memory store in this process's
   * memory, at most `maxLocalEntries` (the oldest go first).
   */
  keyValue(namespace: string, maxLocalEntries: number): KeyValue;
  /**
   * What earlier releases left in the store, for the upgrade step at start-up
   * (`upgradeLegacyData`); undefined where there can be none (the memory
   * store, a Redis Cluster).
   */
  legacy: LegacyTaskData | undefined;
  /**
   * Where forward mode's secret is kept when `auth.forward.secret` is unset
   * (`resolveForwardSecret`): a file of its own beside a SQLite database, this
   * process's memory beside `memory://`; undefined on Redis, which every
   * replica shares and which keeps the sealed keys: the secret must be set.
   */
  forwardSecret: ForwardSecretHome | undefined;
  /**
   * On Redis: which node is the primary and when this process last saw a
   * switch (for `/readyz` and the metrics); undefined on the embedded stores.
   */
  redis?: RedisPrimaryWatch;
  /** Closes the bus and the store (the queues are stopped by their owner first). */
  close(): Promise<void>;
}

/** A kind of backend, for one configuration: opened by the service, probed by `check-config`. */
export interface TaskBackendKind {
  /** Opens the backend (a SQLite file is taken for this process; Redis is connected). */
  open(logger: Logger): Promise<TaskBackend>;
  /**
   * Checks the store as start-up would, without taking it; resolves a short
   * description of what answered.
   * @throws Error whose message names `store.url` and the reason
   */
  probe(logger: Logger): Promise<string>;
}

/** How long an idempotency key lives: past the task it points at, by the whole run. */
export function idempotencyTtlMs(config: Pick<Config, "imageTasks">): number {
  return (config.imageTasks.retentionSec + config.imageTasks.timeoutSec) * 1000;
}

/** Events one background response's log keeps at most (its final event is kept even then). */
export const MAX_EVENTS_PER_RESPONSE = 20_000;

/**
 * How long a response's event log lives after its last event, unless its end
 * sets a shorter life: as long as its task can last and be kept.
 */
export function responseEventsIdleTtlMs(config: Pick<Config, "imageTasks">): number {
  return (config.imageTasks.retentionSec + config.imageTasks.timeoutSec) * 1000;
}

/** Characters all response event logs of one process hold at most (the oldest go first). */
const IN_PROCESS_EVENT_CHARS = 128 * 1024 * 1024;

/** The response event log of the embedded stores (memory, SQLite): this process's, bounded. */
export function inProcessResponseEvents(config: Pick<Config, "imageTasks">): ResponseEventLog {
  return createMemoryResponseEventLog({
    maxEventsPerResponse: MAX_EVENTS_PER_RESPONSE,
    maxTotalChars: IN_PROCESS_EVENT_CHARS,
    idleTtlMs: responseEventsIdleTtlMs(config),
  });
}
