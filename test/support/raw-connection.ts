import { connect, type Socket } from "node:net";
import { onTestFinished } from "vitest";

/** A raw TCP connection to a service, as a misbehaving client holds one. */
export interface RawConnection {
  socket: Socket;
  /** Everything received so far, as latin1 text. */
  readonly received: string;
  /** Whether the service (or the network) has closed the connection. */
  readonly closed: boolean;
  /** Resolves once the connection is closed. */
  whenClosed: Promise<void>;
  /** Resolves the first status line received, or "closed" if the connection closes first. */
  statusLine(): Promise<string>;
  /** Writes text, ignoring a connection already closed. */
  send(text: string): void;
}

/**
 * Opens a raw connection to `port` on 127.0.0.1, from `localAddress` when
 * given (Linux routes all of 127/8 to the loopback, so 127.0.0.2 and
 * 127.0.0.3 are two clients); destroyed when the test ends.
 */
export async function openRaw(port: number, localAddress?: string): Promise<RawConnection> {
  const socket = connect({ port, host: "127.0.0.1", ...(localAddress ? { localAddress } : {}) });
  onTestFinished(() => {
    socket.destroy();
  });
  socket.on("error", () => undefined);
  let received = "";
  let closed = false;
  const whenClosed = new Promise<void>((resolve) =>
    socket.once("close", () => {
      closed = true;
      resolve();
    }),
  );
  socket.on("data", (chunk: Buffer) => (received += chunk.toString("latin1")));
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  return {
    socket,
    get received() {
      return received;
    },
    get closed() {
      return closed;
    },
    whenClosed,
    statusLine: () =>
      new Promise((resolve) => {
        const check = () => {
          const end = received.indexOf("\r\n");
          if (end !== -1) {
            socket.off("data", check);
            resolve(received.slice(0, end));
          } else if (closed) resolve("closed");
        };
        socket.on("data", check);
        void whenClosed.then(check);
        check();
      }),
    send(text) {
      if (!socket.destroyed && socket.writable) socket.write(text);
    },
  };
}

/** Polls `condition` every 100 ms until it holds; fails after `timeoutMs`. */
export async function until(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
