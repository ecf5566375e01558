import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/config/config-error.js";
import type { ImageStore } from "../../src/images/image-store.js";
import { ImageStoreError } from "../../src/images/image-store-error.js";
import { waitForImageStore } from "../../src/images/wait-for-image-store.js";

/*
 * The line start-up prints for an image store that never answered names what the store said.
 * On a loaded machine the last check can be cut by the deadline before its connection is even
 * refused; the line then still names the refusal an earlier check got (the startup-checks
 * test read "timeout" once in CI). The checks here are scripted: which one the deadline cuts
 * is what a real endpoint cannot be made to choose.
 */

const where = "s3://bucket/images at http://127.0.0.1:9";
const refusal = () =>
  new ImageStoreError("ECONNREFUSED", false, "images.s3.endpoint", "unreachable", "HeadBucket");

/** A store whose checks are refused, then (from the `hangFrom`th) never answer until cut. */
function scriptedStore(hangFrom: number): ImageStore & { checks: number } {
  const store = {
    backend: "s3",
    checks: 0,
    async check(signal?: AbortSignal) {
      store.checks += 1;
      if (store.checks < hangFrom) throw refusal();
      await new Promise((_, reject) => {
        signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
      });
    },
  };
  return store as unknown as ImageStore & { checks: number };
}

async function failureLine(store: ImageStore, timeoutMs: number): Promise<string[]> {
  const logger = pino({ level: "silent" });
  const err = await waitForImageStore(store, { timeoutMs, where, logger }).catch((e) => e);
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).problems;
}

describe("start-up's wait for the image store", () => {
  it("names the refusal an earlier check got when the deadline cut the last one", async () => {
    const store = scriptedStore(2);
    expect(await failureLine(store, 1_200)).toEqual([
      `images.s3.endpoint: the image store did not answer within images.connectTimeoutSec (1 s) (ECONNREFUSED, on HeadBucket, ${where})`,
    ]);
    expect(store.checks).toBe(2);
  });

  it("says timeout when no check got an answer", async () => {
    expect(await failureLine(scriptedStore(1), 600)).toEqual([
      `images.s3.endpoint: the image store did not answer within images.connectTimeoutSec (1 s) (timeout, on check, ${where})`,
    ]);
  });
});
