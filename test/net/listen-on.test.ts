import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it, onTestFinished } from "vitest";
import { listenOn } from "../../src/net/listen-on.js";

const FIELDS = { port: "metrics.port", host: "metrics.host" };

function closeOnFinish(server: Server): void {
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
}

describe("listenOn", () => {
  it("listens, and gives the port the system chose and a URL to reach it", async () => {
    const server = createServer((_req, res) => res.end("here"));
    closeOnFinish(server);
    const { port, url } = await listenOn(server, 0, "0.0.0.0", FIELDS);
    expect(port).toBe((server.address() as AddressInfo).port);
    expect(url).toBe(`http://127.0.0.1:${port}`);
    expect(await (await fetch(url)).text()).toBe("here");
  });

  it("names the port's setting when another process holds the port", async () => {
    const taken = createServer();
    closeOnFinish(taken);
    const { port } = await listenOn(taken, 0, "127.0.0.1", FIELDS);
    const second = createServer();
    await expect(listenOn(second, port, "127.0.0.1", FIELDS)).rejects.toThrow(
      `metrics.port: 127.0.0.1:${port} is in use by another process; stop it, or choose another port (EADDRINUSE)`,
    );
    expect(second.listening).toBe(false);
  });

  it("names the host's setting for an address this machine does not have", async () => {
    // 192.0.2.0/24 is TEST-NET-1: documentation only, never a machine's address.
    await expect(listenOn(createServer(), 0, "192.0.2.1", FIELDS)).rejects.toThrow(
      "metrics.host: 192.0.2.1 is not an address of this machine (EADDRNOTAVAIL)",
    );
  });
});
