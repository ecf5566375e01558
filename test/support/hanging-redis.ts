import { createConnection, createServer, type Socket } from "node:net";
import type { AddressInfo } from "node:net";

/**
 * A TCP front for a real Redis that can start hanging: once `hang()` is
 * called, every connection open then, and every one accepted while it
 * hangs, is taken and read but never answered (as a paused or failing-over
 * Redis behaves: the socket is fine, no reply ever comes). `answer()` makes
 * new connections reach Redis again; the hung ones stay silent for ever, so
 * only a client that gives up on them and reconnects recovers.
 */
export interface HangingRedis {
  /** `redis://127.0.0.1:PORT` of the front. */
  url: string;
  hang(): void;
  answer(): void;
  close(): Promise<void>;
}

export async function startHangingRedis(target: { host: string; port: number }) {
  let hanging = false;
  const live = new Set<{ client: Socket; upstream?: Socket; silent: boolean }>();
  const server = createServer((client) => {
    const conn: { client: Socket; upstream?: Socket; silent: boolean } = {
      client,
      silent: hanging,
    };
    live.add(conn);
    client.on("error", () => undefined);
    client.on("close", () => {
      conn.upstream?.destroy();
      live.delete(conn);
    });
    if (!conn.silent) {
      const upstream = createConnection(target.port, target.host);
      conn.upstream = upstream;
      upstream.on("error", () => client.destroy());
      upstream.on("close", () => client.destroy());
      upstream.on("data", (chunk: Buffer) => {
        if (!conn.silent) client.write(chunk);
      });
    }
    client.on("data", (chunk: Buffer) => {
      if (!conn.silent) conn.upstream?.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const front: HangingRedis = {
    url: `redis://127.0.0.1:${port}`,
    hang() {
      hanging = true;
      for (const conn of live) conn.silent = true;
    },
    answer() {
      hanging = false;
    },
    async close() {
      for (const conn of live) {
        conn.client.destroy();
        conn.upstream?.destroy();
      }
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return front;
}
