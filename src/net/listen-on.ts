import type { AddressInfo, Server } from "node:net";

/** Where a server listens: its port (the one the system gave for 0) and a URL to reach it. */
export interface Listening {
  port: number;
  /** `http://HOST:PORT`; an any-address host shown as 127.0.0.1. */
  url: string;
}

/**
 * Listens on `host:port`. A listen the system refuses rejects with an Error
 * naming the configuration fields to change (`fields`: the port's and the
 * host's names, `server.port` and `server.host`, say), where Node's own
 * message names only the system call.
 */
export async function listenOn(
  server: Server,
  port: number,
  host: string,
  fields: { port: string; host: string },
): Promise<Listening> {
  await new Promise<void>((resolve, reject) => {
    const refused = (err: NodeJS.ErrnoException) => reject(listenError(err, port, host, fields));
    server.once("error", refused);
    server.listen(port, host, () => {
      server.off("error", refused);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  const shown = ["0.0.0.0", "::", ""].includes(host) ? "127.0.0.1" : host;
  return { port: bound, url: `http://${shown.includes(":") ? `[${shown}]` : shown}:${bound}` };
}

/** Node's listen error as the fields to change; other errors as they came. */
export function listenError(
  err: NodeJS.ErrnoException,
  port: number,
  host: string,
  fields: { port: string; host: string },
): Error {
  const where = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  const message = {
    EADDRINUSE: `${fields.port}: ${where} is in use by another process; stop it, or choose another port`,
    EACCES: `${fields.port}: ${where} needs privileges this process does not have (ports under 1024, as a rule); choose a port from 1024 up`,
    EADDRNOTAVAIL: `${fields.host}: ${host} is not an address of this machine`,
  }[err.code ?? ""];
  return message === undefined ? err : new Error(`${message} (${err.code})`, { cause: err });
}
