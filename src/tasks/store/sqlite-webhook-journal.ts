import type { Database } from "better-sqlite3";
import type { PendingDelivery, WebhookJournal } from "../../webhooks/webhook-queue.js";

/**
 * The in-process webhook queue's pending deliveries in the SQLite store's
 * `webhook_journal` table, one row each, on the store's own connection: they
 * outlive the process with the tasks.
 */
export function createSqliteWebhookJournal(db: Database): WebhookJournal {
  const list = db.prepare("SELECT pending FROM webhook_journal ORDER BY seq").pluck();
  const save = db.prepare(
    `INSERT INTO webhook_journal (event_id, pending) VALUES (?, ?)
     ON CONFLICT (event_id) DO UPDATE SET pending = excluded.pending`,
  );
  const remove = db.prepare("DELETE FROM webhook_journal WHERE event_id = ?");
  return {
    async list() {
      return (list.all() as string[]).map((text) => JSON.parse(text) as PendingDelivery);
    },
    async save(pending) {
      save.run(pending.delivery.eventId, JSON.stringify(pending));
    },
    async remove(eventId) {
      remove.run(eventId);
    },
  };
}
