import type { Socket } from "node:net";
import { describe, expect, it, onTestFinished } from "vitest";
import { encodePng } from "../../../src/demo/png-encoder.js";
import { startFakeUpstream } from "../../support/fake-upstream.js";
import { startTestApp } from "../../support/start-test-app.js";
import { submitOk, waitForStatus, waitUntil } from "../task-api.js";

// A gateway that answers with image URLs serves them from one host: the service downloads them
// over kept-alive connections, as a browser would, not over a connection (a TLS handshake on
// https) of its own per image, and closes them when it stops.

const PNG = encodePng({ width: 2, height: 2, channels: 3, pixels: new Uint8Array(12) });

describe("image URL downloads", () => {
  it("reuse their connections from one task to the next, closed when the service stops", async () => {
    const upstream = await startFakeUpstream();
    onTestFinished(() => upstream.close());
    const sockets = new Set<Socket>();
    for (const name of ["a.png", "b.png"]) {
      upstream.serve(`/files/${name}`, (req, res) => {
        sockets.add(req.socket);
        res.writeHead(200, { "content-type": "image/png" }).end(PNG);
      });
    }
    upstream.behave("images", {
      kind: "status",
      status: 200,
      body: {
        created: 1,
        data: ["a.png", "b.png"].map((name) => ({ url: `${upstream.origin}/files/${name}` })),
      },
    });
    // The test app's channel, on this upstream, which outlives the app: what closes the
    // connections is the service.
    const app = await startTestApp({ upstream });
    let closed = false;
    onTestFinished(async () => {
      if (!closed) await app.close();
    });

    const first = await submitOk(app, { prompt: "two images", n: 2 });
    expect((await waitForStatus(app, first, ["completed", "failed"])).body.status).toBe(
      "completed",
    );
    const afterFirst = sockets.size;
    expect(afterFirst).toBeGreaterThan(0);
    const second = await submitOk(app, { prompt: "two more", n: 2 });
    const done = await waitForStatus(app, second, ["completed", "failed"]);
    expect(done.body.status, done.text).toBe("completed");
    expect(done.body.data).toHaveLength(2);
    // Four downloads; the second task's went over the first's connections.
    expect(sockets.size).toBe(afterFirst);

    await app.close();
    closed = true;
    // Within a second (stretched on a loaded machine): idle, undici would close them itself
    // after 4 s.
    await waitUntil(
      () => [...sockets].every((socket) => socket.destroyed),
      "the download connections closed",
      1_000,
    );
  });
});
