import { createHmac } from "node:crypto";

/** The three Standard Webhooks headers of one attempt. */
export interface WebhookSignatureHeaders {
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
}

/**
 * Standard Webhooks signing: `v1,` and the base64 HMAC-SHA256, keyed with
 * `key` (the decoded bytes of the `whsec_` secret), of `{id}.{timestamp}.{body}`.
 * The timestamp is the attempt's own, so receivers can refuse replays of old
 * attempts; the id stays the event's, so they can drop duplicates.
 *
 * @param timestamp Unix seconds of the attempt
 * @param body the exact bytes sent (the signature covers them, not a re-serialisation)
 */
export function signWebhook(
  key: Uint8Array,
  id: string,
  timestamp: number,
  body: string,
): WebhookSignatureHeaders {
  const signature = createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64");
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": `v1,${signature}`,
  };
}
