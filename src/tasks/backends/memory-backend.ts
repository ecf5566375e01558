import Keyv from "keyv";
import type { Logger } from "pino";
import { processForwardSecretHome } from "../../auth/resolve-forward-secret.js";
import type { Config } from "../../config/config-schema.js";
import { createInProcessWebhookQueue } from "../../webhooks/in-process-webhook-queue.js";
import { createLocalTaskEvents } from "../core/task-events.js";
import { createInProcessQueue } from "../queue/in-process-queue.js";
import { createKeyvTaskStore } from "../store/keyv-task-store.js";
import { createKeyvWebhookJournal } from "../store/keyv-webhook-journal.js";
import { createBoundedKeyValue } from "../../collections/bounded-key-value.js";
import {
  idempotencyTtlMs,
  inProcessResponseEvents,
  type TaskBackend,
  type TaskBackendKind,
} from "./task-backend.js";

/**
 * `memory://`: everything in this process, lost on restart. The store is
 * Keyv on a Map (records kept as objects, never serialized: a record costs
 * its object, not JSON text), with the webhook journal beside it; the queues
 * and the bus are in-process; key-value entries live in a bounded map; a
 * forward secret is made anew each start. Nothing of an earlier release can
 * be there.
 */
export function memoryBackend(config: Config): TaskBackendKind {
  return {
    open: async (logger) => openMemoryBackend(config, logger),
    probe: async () => "memory:// (this process)",
  };
}

function openMemoryBackend(config: Config, logger: Logger): TaskBackend {
  const keyv = new Keyv({ namespace: "its" });
  keyv.serialize = undefined;
  keyv.deserialize = undefined;
  // Keyv reports backend trouble as events; an unheard one would crash the process.
  keyv.on("error", (err: unknown) => logger.error({ err }, "task store error"));
  const store = createKeyvTaskStore(keyv, {
    persistent: false,
    idempotencyTtlMs: idempotencyTtlMs(config),
  });
  const webhookJournal = createKeyvWebhookJournal(keyv);
  const events = createLocalTaskEvents(logger);
  return {
    store,
    events,
    queue: createInProcessQueue({
      maxConcurrent: config.imageTasks.maxConcurrent,
      handsBack: false,
    }),
    webhooks: createInProcessWebhookQueue({
      journal: webhookJournal,
      logger: logger.child({ component: "webhooks" }),
    }),
    webhookJournal,
    responseEvents: inProcessResponseEvents(config),
    // One map a namespace (each call its own), in this process's memory.
    keyValue: (_namespace, maxLocalEntries) => createBoundedKeyValue(maxLocalEntries),
    legacy: undefined,
    forwardSecret: processForwardSecretHome(),
    async close() {
      await events.close();
      await store.close();
    },
  };
}
