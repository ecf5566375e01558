import { fork, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeUpstream, type FakeUpstream } from "../support/fake-upstream.js";
import { TEST_KEYS, testConfig } from "../support/start-test-app.js";
import { slow } from "../support/time-factor.js";

// A 30 MB upload streams through: measured in the service's own process (the built dist/),
// as the peak of Buffer memory over the upload, so the test runner's own memory is no part.
const MB = 1024 * 1024;
let upstream: FakeUpstream;
let child: ChildProcess;
let baseURL: string;

const ask = <T>(message: string, key: string): Promise<T> =>
  new Promise((resolvePromise) => {
    const onMessage = (reply: Record<string, unknown>) => {
      if (!(key in reply)) return;
      child.off("message", onMessage);
      resolvePromise(reply[key] as T);
    };
    child.on("message", onMessage);
    child.send(message);
  });

beforeAll(async () => {
  upstream = await startFakeUpstream();
  // What the child parses again: the file's fields, not what parsing worked out of them.
  const { deployment: _deployment, ...config } = testConfig(upstream.baseUrl);
  child = fork(
    resolve(import.meta.dirname, "../support/serve-in-child.mjs"),
    [JSON.stringify(config)],
    {
      execArgv: ["--expose-gc"],
      stdio: "inherit",
    },
  );
  baseURL = `${await ask<string>("", "url")}/v1`;
});
afterAll(async () => {
  child?.send("stop");
  await new Promise((resolveExit) => child?.once("exit", resolveExit));
  await upstream?.close();
});

type Memory = { rss: number; arrayBuffers: number };

/**
 * A form of `file` sent at about 20 MB/s, so the service's memory is sampled (after a garbage
 * collection, every 100 ms) many times while the upload is under way.
 */
function paced(
  file: Buffer,
  modelFirst: boolean,
): { body: ReadableStream<Uint8Array>; type: string } {
  const boundary = "----upload-memory-test";
  const field = (name: string, value: string) =>
    `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
  const head =
    (modelFirst ? field("model", "gpt-image-1") : "") +
    field("prompt", "a hat") +
    `--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="big.png"\r\nContent-Type: image/png\r\n\r\n`;
  // The SDKs send model after the files: then the head is spooled to a temporary file.
  const tail = `\r\n${modelFirst ? "" : field("model", "gpt-image-1")}--${boundary}--\r\n`;
  let at = 0;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(Buffer.from(head));
    },
    async pull(controller) {
      if (at >= file.length) {
        controller.enqueue(Buffer.from(tail));
        controller.close();
        return;
      }
      controller.enqueue(file.subarray(at, at + MB));
      at += MB;
      await new Promise((resolveWait) => setTimeout(resolveWait, 50));
    },
  });
  return { body, type: `multipart/form-data; boundary=${boundary}` };
}

async function upload(modelFirst: boolean): Promise<{ before: Memory; peak: Memory }> {
  const file = Buffer.alloc(30 * MB, 0x5a);
  const before = await ask<Memory>("reset", "baseline");
  const seen = upstream.nextRequest("edits");
  const { body, type } = paced(file, modelFirst);
  const response = await fetch(`${baseURL}/images/edits`, {
    method: "POST",
    headers: { authorization: `Bearer ${TEST_KEYS.default}`, "content-type": type },
    body,
    duplex: "half",
  } as RequestInit);
  expect(response.status).toBe(200);
  await response.arrayBuffer();
  const peak = await ask<Memory>("memory", "peak");
  const received = await seen;
  expect(received.form?.files.image?.size).toBe(file.length);
  expect(received.form?.files.image?.sha256).toBe(createHash("sha256").update(file).digest("hex"));
  expect(received.form?.fields.model).toBe("gpt-image-1");
  return { before, peak };
}

describe("a 30 MB multipart upload", () => {
  it.each([true, false])(
    "streams through with little memory (model first: %s)",
    async (modelFirst) => {
      const { before, peak } = await upload(modelFirst);
      const grew = (peak.arrayBuffers - before.arrayBuffers) / MB;
      const rss = ((peak.rss - before.rss) / MB).toFixed(1);
      expect(grew, `Buffer memory grew ${grew.toFixed(1)} MB (rss ${rss} MB)`).toBeLessThan(8);
    },
    // A few seconds alone; the service's process collects garbage every 100 ms to sample its
    // memory, and on 2 shared cores under a full suite the upload took past 30 s (before and
    // after the channel requests stopped going through http-proxy alike).
    slow(120_000),
  );
});
