import type { Metrics } from "../metrics/create-metrics.js";
import type { ImageStore } from "./image-store.js";

type Op = "put" | "get" | "delete" | "list" | "ping" | "check";
type Outcome = "ok" | "not_found" | "error";

/**
 * The same store, counting every operation by backend, op and outcome with
 * its latency, and the bytes written. A `get` is timed until its stream can
 * start (the first byte's latency); what the reader does with it is its own.
 */
export function withImageStoreMetrics(
  store: ImageStore,
  metrics: Pick<Metrics, "imageStoreOperations" | "imageStoreDuration" | "imageStoreWrittenBytes">,
): ImageStore {
  const { backend } = store;
  const observe = (op: Op, started: bigint, outcome: Outcome) => {
    metrics.imageStoreOperations.inc({ backend, op, outcome });
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    metrics.imageStoreDuration.observe({ backend, op }, seconds);
  };
  async function timed<T>(op: Op, step: () => Promise<T>, outcomeOf?: (value: T) => Outcome) {
    const started = process.hrtime.bigint();
    try {
      const value = await step();
      observe(op, started, outcomeOf?.(value) ?? "ok");
      return value;
    } catch (err) {
      observe(op, started, "error");
      throw err;
    }
  }

  return {
    backend,
    async put(key, bytes, contentType) {
      await timed("put", () => store.put(key, bytes, contentType));
      metrics.imageStoreWrittenBytes.inc({ backend }, bytes.byteLength);
    },
    get: (key, signal) =>
      timed(
        "get",
        () => store.get(key, signal),
        (found) => (found ? "ok" : "not_found"),
      ),
    delete: (keys) => timed("delete", () => store.delete(keys)),
    async *list(prefix) {
      // One observation per listing, its outcome the whole walk's; a reader that stops early
      // (the sweep stops at today's keys) ends the walk through `finally` alone.
      const started = process.hrtime.bigint();
      let outcome: Outcome = "ok";
      try {
        yield* store.list(prefix);
      } catch (err) {
        outcome = "error";
        throw err;
      } finally {
        observe("list", started, outcome);
      }
    },
    ping: () => timed("ping", () => store.ping()),
    check: (signal) => timed("check", () => store.check(signal)),
    objectKey: (key) => store.objectKey(key),
    ...(store.presign ? { presign: store.presign.bind(store) } : {}),
    close: () => store.close(),
  };
}
