import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { signWebhook } from "../../src/webhooks/sign-webhook.js";
import { blocksOf } from "./markdown.js";

// docs/image-tasks.md shows receivers how to check a webhook's signature without a library:
// that very code, against what the service signs.
const ROOT = resolve(import.meta.dirname, "../..");
const block = blocksOf(ROOT, "docs/image-tasks.md").find((candidate) =>
  candidate.code.includes("export function verifyWebhook"),
);

type Verify = (secret: string, headers: Record<string, string>, body: string | Buffer) => boolean;

describe("the webhook verification code in docs/image-tasks.md", () => {
  it("accepts what the service signs, refuses a changed body, key or an old timestamp", async () => {
    expect(block, "a js block exporting verifyWebhook").toBeDefined();
    const source = `data:text/javascript;base64,${Buffer.from(block!.code).toString("base64")}`;
    const { verifyWebhook } = (await import(source)) as { verifyWebhook: Verify };
    const key = Buffer.alloc(32, 9);
    const secret = `whsec_${key.toString("base64")}`;
    const body = JSON.stringify({ id: "evt_1", type: "image.task.completed" });
    const now = Math.floor(Date.now() / 1000);
    const headers = { ...signWebhook(key, "evt_1", now, body) };

    expect(verifyWebhook(secret, headers, body)).toBe(true);
    expect(verifyWebhook(secret, headers, Buffer.from(body))).toBe(true);
    expect(verifyWebhook(secret, headers, body.replace("completed", "failed"))).toBe(false);
    expect(verifyWebhook(`whsec_${Buffer.alloc(32, 8).toString("base64")}`, headers, body)).toBe(
      false,
    );
    const old = { ...signWebhook(key, "evt_1", now - 600, body) };
    expect(verifyWebhook(secret, old, body)).toBe(false);
  });
});
