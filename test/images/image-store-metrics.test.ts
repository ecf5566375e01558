import { describe, expect, it } from "vitest";
import { createMemoryImageStore } from "../../src/images/memory-image-store.js";
import { withImageStoreMetrics } from "../../src/images/with-image-store-metrics.js";
import { createMetrics } from "../../src/metrics/create-metrics.js";

describe("image store metrics", () => {
  it("counts operations by backend, op and outcome, with latency, and the bytes written", async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const inner = createMemoryImageStore();
    const store = withImageStoreMetrics(inner, metrics);
    await store.put("2030-01-01/task_m/0.png", Buffer.alloc(1234), "image/png");
    (await store.get("2030-01-01/task_m/0.png"))!.body.destroy();
    expect(await store.get("2030-01-01/task_m/9.png")).toBeUndefined();
    await expect(store.get("../escape")).rejects.toThrow();
    // A listing the reader stops early (as the expiry sweep does) is counted too.
    for await (const _ of store.list("")) break;
    await store.delete(["2030-01-01/task_m/0.png"]);
    await store.ping();

    const text = await metrics.registry.metrics();
    const line = (op: string, outcome: string) =>
      `image_task_sidecar_image_store_operations_total{backend="memory",op="${op}",outcome="${outcome}"} 1`;
    for (const [op, outcome] of [
      ["put", "ok"],
      ["get", "ok"],
      ["get", "not_found"],
      ["get", "error"],
      ["list", "ok"],
      ["delete", "ok"],
      ["ping", "ok"],
    ] as const) {
      expect(text).toContain(line(op, outcome));
    }
    expect(text).toContain(
      'image_task_sidecar_image_store_written_bytes_total{backend="memory"} 1234',
    );
    expect(text).toContain(
      'image_task_sidecar_image_store_operation_duration_seconds_count{backend="memory",op="get"} 3',
    );
  });
});
