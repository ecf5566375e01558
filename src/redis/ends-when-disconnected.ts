import type { Redis } from "ioredis";

/**
 * Makes the clients duplicated from `connection` (BullMQ's blocking one)
 * end when disconnected between two reconnect attempts. ioredis emits no `end`
 * then (redis/ioredis#1247: the socket is gone, the retry timer is cleared,
 * nothing else happens), and BullMQ's worker close waits for that `end`: a
 * replica stopped while Redis was down or failing over never stopped.
 */
export function endsWhenDisconnected(connection: Redis): void {
  const duplicate = connection.duplicate.bind(connection);
  connection.duplicate = (...args: Parameters<Redis["duplicate"]>) => {
    const copy = duplicate(...args);
    const disconnect = copy.disconnect.bind(copy);
    copy.disconnect = (reconnect = false) => {
      const between = copy.status === "reconnecting";
      disconnect(reconnect);
      if (between && !reconnect) {
        copy.status = "end";
        copy.emit("end");
      }
    };
    return copy;
  };
}
