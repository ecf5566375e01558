import { describe, expect, it } from "vitest";
import { createConcurrencyLimit } from "../../src/webhooks/concurrency-limit.js";

/** A promise and its resolve, to hold a function open until the test lets it go. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe("createConcurrencyLimit", () => {
  it("runs at most max at once, in order of arrival", async () => {
    const limit = createConcurrencyLimit(2);
    const gates = [gate(), gate(), gate()];
    const started: number[] = [];
    const runs = gates.map((g, i) =>
      limit.run(async () => {
        started.push(i);
        await g.opened;
        return i;
      }),
    );
    await Promise.resolve();
    expect(started).toEqual([0, 1]);
    expect([limit.active, limit.waiting]).toEqual([2, 1]);
    gates[1]!.open();
    await runs[1];
    await Promise.resolve();
    expect(started).toEqual([0, 1, 2]);
    gates[0]!.open();
    gates[2]!.open();
    expect(await Promise.all(runs)).toEqual([0, 1, 2]);
    expect([limit.active, limit.waiting]).toEqual([0, 0]);
  });

  it("frees the slot when a function throws", async () => {
    const limit = createConcurrencyLimit(1);
    await expect(limit.run(async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(await limit.run(async () => "next")).toBe("next");
  });

  it("takes an aborted waiter out of the line, without running it", async () => {
    const limit = createConcurrencyLimit(1);
    const first = gate();
    const running = limit.run(() => first.opened);
    const stop = new AbortController();
    let ran = false;
    const waiting = limit.run(async () => {
      ran = true;
    }, stop.signal);
    expect(limit.waiting).toBe(1);
    stop.abort(new Error("stopped"));
    await expect(waiting).rejects.toThrow("stopped");
    expect(limit.waiting).toBe(0);
    first.open();
    await running;
    expect(ran).toBe(false);
    expect([limit.active, limit.waiting]).toEqual([0, 0]);
  });
});
