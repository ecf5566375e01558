import { pbkdf2 } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { expectError } from "../http/error-envelope.js";
import { startTestApp, TEST_KEYS, type TestApp } from "../support/start-test-app.js";
import { slow } from "../support/time-factor.js";

/*
 * A passthrough form (an image edit, a transcription) is spooled up to its `model` field: in
 * memory up to 256 KiB, then in a file of the OS temp directory. A client that goes away while
 * that file is being written (a cancelled upload, a browser that navigated away), or a temp
 * directory that cannot be written, once raised an 'error' nothing listened to, and the whole
 * process ended, with every task and request it held.
 */

const BOUNDARY = "upload-aborted";
/** Past the 256 KiB kept in memory: the rest goes to the spool file. */
const HEAD = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n${"A".repeat(300 * 1024)}`;

/** Points the OS temp directory (where spool files go) at a directory of the test's own. */
async function ownTempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "upload-aborted-"));
  const before = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  onTestFinished(async () => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    await rm(dir, { recursive: true, force: true });
  });
  return dir;
}

/**
 * Sends a form's head past the memory spool, then, once the spool file is open, a few more KiB
 * and goes away: with a FIN (`end`) or a reset.
 */
function abandonUpload(app: TestApp, how: "end" | "reset"): Promise<void> {
  const port = Number(new URL(app.url).port);
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.setNoDelay(true);
      socket.write(
        [
          "POST /v1/images/edits HTTP/1.1",
          "Host: 127.0.0.1",
          `Authorization: Bearer ${TEST_KEYS.default}`,
          `Content-Type: multipart/form-data; boundary=${BOUNDARY}`,
          "Content-Length: 2000000",
          "",
          HEAD,
        ].join("\r\n"),
      );
      setTimeout(() => {
        socket.write("A".repeat(4096));
        if (how === "end") socket.end();
        else socket.resetAndDestroy();
      }, 30);
    });
    // Whatever the service answers is read and dropped: the socket closes once both sides end.
    socket.resume();
    socket.on("error", () => undefined);
    socket.on("close", () => resolve());
  });
}

/**
 * Keeps each of libuv's four threads (file opens wait for one) busy for about `ms`; resolves
 * once they are free again.
 */
function occupyThreadPool(ms: number): Promise<unknown> {
  const hash = () =>
    new Promise((resolve) => {
      pbkdf2("x", "salt", ms * 1_300, 64, "sha512", resolve);
    });
  return Promise.all([hash(), hash(), hash(), hash()]);
}

describe("a form upload that is not completed", () => {
  it("from a client that goes away mid-spool leaves the service up and no spool file", async () => {
    const dir = await ownTempDir();
    const app = await startTestApp();
    onTestFinished(() => app.close());
    for (let n = 0; n < 5; n += 1) {
      await abandonUpload(app, "end");
      await abandonUpload(app, "reset");
    }
    const models = await fetch(`${app.url}/v1/models`, {
      headers: { authorization: `Bearer ${TEST_KEYS.default}` },
    });
    expect(models.status).toBe(200);
    // Each spool file is removed once its form is given up.
    await expect.poll(() => readdir(dir), { timeout: slow(5_000) }).toEqual([]);
  });

  it("while file opens wait (a busy thread pool) leaves no spool file either", async () => {
    // Under load a spool file's open can still be under way when its client goes away: the
    // file must be removed once the open is done, not before (it then appeared after the
    // removal and stayed).
    const dir = await ownTempDir();
    const app = await startTestApp();
    onTestFinished(() => app.close());
    for (let n = 0; n < 3; n += 1) {
      const pool = occupyThreadPool(300);
      await Promise.all([abandonUpload(app, "reset"), abandonUpload(app, "end")]);
      await pool;
    }
    await expect.poll(() => readdir(dir), { timeout: slow(5_000) }).toEqual([]);
  });

  it("into a temp directory that cannot be written is a 500 internal_error, not the end of the process", async () => {
    const dir = await ownTempDir();
    process.env.TMPDIR = join(dir, "missing");
    const app = await startTestApp();
    onTestFinished(() => app.close());
    const form = `${HEAD}\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nx\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name="model"\r\n\r\ngpt-image-1\r\n--${BOUNDARY}--\r\n`;
    const response = await fetch(`${app.url}/v1/images/edits`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${TEST_KEYS.default}`,
        "content-type": `multipart/form-data; boundary=${BOUNDARY}`,
      },
      body: form,
    });
    await expectError(response, 500, "internal_error");
    expect(app.upstream.requests).toHaveLength(0);
    expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
  });
});
