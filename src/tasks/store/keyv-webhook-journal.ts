import type Keyv from "keyv";
import type { PendingDelivery, WebhookJournal } from "../../webhooks/webhook-queue.js";
import { exclusive } from "./keyv-task-state.js";

/** Event ids of the pending webhook deliveries, each kept at `webhook:<eventId>`. */
const DELIVERIES = "index:webhooks";
const deliveryKey = (eventId: string) => `webhook:${eventId}`;

/**
 * The in-process webhook queue's pending deliveries, in the memory store's
 * Keyv beside the tasks (keys of their own, so its steps need not wait for
 * the store's): each change of its list runs one at a time.
 */
export function createKeyvWebhookJournal(keyv: Keyv): WebhookJournal {
  const steps = { chain: Promise.resolve() as Promise<unknown> };
  const readDeliveries = async () => ((await keyv.get(DELIVERIES)) as string[] | undefined) ?? [];
  return {
    async list() {
      const ids = await readDeliveries();
      if (ids.length === 0) return [];
      const pending = (await keyv.get(ids.map(deliveryKey))) as Array<PendingDelivery | undefined>;
      return pending.filter((entry): entry is PendingDelivery => entry !== undefined);
    },
    save(pending) {
      return exclusive(steps, async () => {
        const { eventId } = pending.delivery;
        await keyv.set(deliveryKey(eventId), pending);
        const listed = await readDeliveries();
        if (!listed.includes(eventId)) await keyv.set(DELIVERIES, [...listed, eventId]);
      });
    },
    remove(eventId) {
      return exclusive(steps, async () => {
        await keyv.delete(deliveryKey(eventId));
        const listed = await readDeliveries();
        if (listed.includes(eventId)) {
          await keyv.set(
            DELIVERIES,
            listed.filter((other) => other !== eventId),
          );
        }
      });
    },
  };
}
