import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/start-test-app.js";

let app: TestApp | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await app?.close();
  app = undefined;
});

/** A raw connection to the service, open and silent. */
async function open(port: number): Promise<Socket> {
  const socket = connect(port, "127.0.0.1");
  sockets.push(socket);
  socket.on("error", () => undefined);
  await new Promise((resolve) => socket.once("connect", resolve));
  return socket;
}

/** Sends `GET /healthz` on `socket`; resolves the status line, or "closed" if it is closed first. */
function health(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("latin1");
      if (text.includes("\r\n")) resolve(text.slice(0, text.indexOf("\r\n")));
    });
    socket.once("close", () => resolve("closed"));
    socket.write("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
  });
}

describe("server.maxConnections", () => {
  it("closes a connection past the cap at once, serves the open ones, and takes new ones once some close", async () => {
    app = await startTestApp({
      config: { server: { port: 0, host: "127.0.0.1", maxConnections: 3 } },
    });
    const { port } = app.server;
    const held = [await open(port), await open(port), await open(port)];
    const refused = await open(port);
    expect(await health(refused)).toBe("closed");
    // The connections under the cap are served as usual.
    expect(await health(held[0]!)).toBe("HTTP/1.1 200 OK");

    held[1]!.destroy();
    held[2]!.destroy();
    // The server counts a closed connection once it has seen it close.
    for (let i = 0; i < 100; i++) {
      const again = await open(port);
      if ((await health(again)) !== "closed") return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect.fail("no connection was taken after two closed");
  });
});
