import { slow } from "../../support/time-factor.js";
import { randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import {
  idleImageBufferBytes,
  releaseImageBuffers,
  takeImageBuffer,
} from "../../../src/tasks/run/image-buffers.js";
import { startS3Server, type TestS3Server } from "../../support/s3-server.js";
import type { FakeUpstream } from "../../support/fake-upstream.js";
import {
  PNG_MAGIC,
  getTask,
  submitOk,
  useApp,
  useTempDir,
  waitForStatus,
  waitUntil,
} from "../task-api.js";

// Images are decoded into buffers that come back once their bytes are stored, for the next
// run: a reused buffer must never show in an image stored before, nor come back too early.

let s3: TestS3Server;
beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(async () => {
  await s3?.close();
});

/** A PNG-looking image of `bytes` bytes: the signature, then noise. */
const image = (bytes: number) => Buffer.concat([PNG_MAGIC, randomBytes(bytes - PNG_MAGIC.length)]);

/** The channel answers each prompt with an image of its own, sized, as a real channel sends it. */
function answerByPrompt(upstream: FakeUpstream, images: Map<string, Buffer>) {
  upstream.behave("images", {
    kind: "custom",
    respond: (_req, res: ServerResponse, body) => {
      const prompt = (body as { prompt: string }).prompt;
      const text = JSON.stringify({
        created: 1,
        data: [{ b64_json: images.get(prompt)!.toString("base64") }],
      });
      res.writeHead(200, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(text),
      });
      // In pieces, as a socket delivers it.
      const bytes = Buffer.from(text);
      for (let at = 0; at < bytes.length; at += 60_000) res.write(bytes.subarray(at, at + 60_000));
      res.end();
    },
  });
}

/** Runs `count` tasks at once, each with an image of its own; checks every stored image. */
async function runAndCheck(app: Awaited<ReturnType<typeof useApp>>, images: Map<string, Buffer>) {
  const ids = await Promise.all(
    [...images.keys()].map(async (prompt) => ({
      prompt,
      id: await submitOk(app, { prompt, response_format: "b64_json" }),
    })),
  );
  for (const { prompt, id } of ids) {
    const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
    expect(done.body.status, done.text).toBe("completed");
    const stored = Buffer.from(done.body.data![0]!.b64_json!, "base64");
    expect(stored.equals(images.get(prompt)!), prompt).toBe(true);
  }
}

/**
 * The most bytes idle in the pool from now on, read every few milliseconds: idle buffers are
 * dropped a second after the last one came back, and a loaded run (CI's) took longer than that
 * from the last image stored to a read after the checks. A 5 ms timer always fires before the
 * pool's drop, armed 1 s after a buffer comes back, on the same event loop.
 */
function watchIdleBytes(): () => number {
  let most = 0;
  const timer = setInterval(() => {
    most = Math.max(most, idleImageBufferBytes());
  }, 5);
  onTestFinished(() => clearInterval(timer));
  return () => most;
}

describe("the buffers images are decoded into", () => {
  it("lends a buffer at least as large as asked, and takes back only its own, once", () => {
    const lent = takeImageBuffer(300_000);
    expect(lent.length).toBeGreaterThanOrEqual(300_000);
    const before = idleImageBufferBytes();
    releaseImageBuffers([Buffer.alloc(300_000), lent.subarray(0, 10)]);
    releaseImageBuffers([lent.subarray(5, 20)]);
    expect(idleImageBufferBytes()).toBe(before + lent.length);
    const again = takeImageBuffer(290_000);
    expect(again.buffer).toBe(lent.buffer);
    expect(idleImageBufferBytes()).toBe(before);
  });

  it(
    "stores every image as the channel sent it, buffers reused across tasks (file, memory, S3)",
    async () => {
      const dir = await useTempDir();
      const places = [
        { url: `file://${dir}/images` },
        { url: "memory://" },
        s3.imagesConfig(`buffers-${randomBytes(4).toString("hex")}`),
      ];
      for (const images of places) {
        const app = await useApp({ imageTasks: { maxConcurrent: 3 }, config: { images } });
        // From an empty pool (a second after the last store's runs): what it then holds is theirs.
        await waitUntil(() => idleImageBufferBytes() === 0, "idle buffers dropped");
        const mostIdle = watchIdleBytes();
        for (let round = 0; round < 3; round += 1) {
          const sent = new Map(
            Array.from({ length: 5 }, (_, n) => [
              `r${round}-${n}`,
              image(200_000 + n * 40_000 + round),
            ]),
          );
          answerByPrompt(app.upstream, sent);
          await runAndCheck(app, sent);
        }
        // Their buffers came back for the next runs.
        expect(mostIdle()).toBeGreaterThan(0);
      }
    },
    slow(60_000),
  );

  it(
    "keeps a buffer whose store write failed once out of reuse, and stores the image right",
    async () => {
      const app = await useApp({
        config: {
          images: {
            ...s3.imagesConfig(`buffers-${randomBytes(4).toString("hex")}`),
            writeRetrySec: 30,
          },
        },
      });
      const sent = image(500_000);
      const asked = app.upstream.nextRequest("images");
      let answer: (() => void) | undefined;
      app.upstream.behave("images", {
        kind: "custom",
        respond: (_req, res: ServerResponse) => {
          const text = JSON.stringify({
            created: 1,
            data: [{ b64_json: sent.toString("base64") }],
          });
          answer = () =>
            res
              .writeHead(200, {
                "content-type": "application/json",
                "content-length": Buffer.byteLength(text),
              })
              .end(text);
        },
      });
      // The buffers of the test before dropped (idle for a while), so that none is idle here.
      await waitUntil(() => idleImageBufferBytes() === 0, "idle buffers dropped");
      const id = await submitOk(app, { prompt: "stored late", response_format: "b64_json" });
      await asked;
      await waitUntil(() => answer !== undefined, "the channel's call");
      await s3.stop();
      try {
        answer!();
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        expect((await getTask(app, id)).body.status).toBe("in_progress");
      } finally {
        await s3.start();
      }
      const done = await waitForStatus(app, id, ["completed", "failed"], 30_000);
      expect(done.body.status, done.text).toBe("completed");
      expect(Buffer.from(done.body.data![0]!.b64_json!, "base64").equals(sent)).toBe(true);
      // A put of the failed try may still have been reading it: it is left to the GC.
      expect(idleImageBufferBytes()).toBe(0);
    },
    slow(40_000),
  );
});
