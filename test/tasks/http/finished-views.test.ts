import { afterEach, describe, expect, it, vi } from "vitest";
import type { TaskRecord } from "../../../src/tasks/core/task-record.js";
import { FinishedViews } from "../../../src/tasks/http/finished-views.js";

/*
 * The kept answers of finished tasks (see finished-answers.test.ts for what a
 * poll sends): an answer is sent again only for the run it was made for, and
 * what is kept stays within its bounds (16 KiB an answer, 2 MiB and 4,096
 * answers in all, ten minutes each).
 */

function finished(id: string, patch: Partial<TaskRecord> = {}): TaskRecord {
  return {
    id,
    owner: "key:a",
    status: "completed",
    model: "gpt-image-1",
    request: { prompt: "a fox" },
    responseFormat: "url",
    created: 1_700_000_000,
    completed_at: 1_700_000_010,
    expires_at: 1_700_086_410,
    attempts: 1,
    images: [{ key: `2026-12-03/${id}-0.png` }],
    ...patch,
  } as TaskRecord;
}

const VARIANT = " http://a.example";

describe("FinishedViews", () => {
  afterEach(() => vi.useRealTimers());

  it("gives an answer back only for the same run of the same task, in the same variant", () => {
    const views = new FinishedViews();
    const record = finished("task_a");
    views.set(record, VARIANT, '{"id":"task_a"}');
    const kept = views.get(record, VARIANT);
    expect(kept?.body).toBe('{"id":"task_a"}');
    expect(kept?.headers).toEqual({
      "Content-Type": "application/json; charset=utf-8",
      "Content-Length": 15,
    });
    expect(views.get(record, " http://b.example")).toBeUndefined();
    expect(views.get(record, `service${VARIANT}`)).toBeUndefined();
    for (const changed of [
      { attempts: 2 },
      { status: "failed" as const },
      { owner: "key:b" },
      { completed_at: 1_700_000_011 },
      { expires_at: 1_700_086_411 },
      { images: [{ key: "2026-12-03/other-0.png" }] },
    ]) {
      expect(
        views.get({ ...record, ...changed } as TaskRecord, VARIANT),
        JSON.stringify(changed),
      ).toBeUndefined();
    }
    views.forget("task_a");
    expect(views.get(record, VARIANT)).toBeUndefined();
  });

  it("keeps answers of up to 16 KiB, 2 MiB in all, the oldest going first", () => {
    const views = new FinishedViews();
    views.set(finished("big"), VARIANT, "x".repeat(16 * 1024 + 1));
    expect(views.get(finished("big"), VARIANT)).toBeUndefined();

    const body = "y".repeat(16 * 1024);
    // 128 answers of 16 KiB fill 2 MiB: the 129th puts the first one out.
    for (let i = 0; i <= 128; i += 1) views.set(finished(`t${i}`), VARIANT, body);
    expect(views.get(finished("t0"), VARIANT)).toBeUndefined();
    for (const i of [1, 64, 128]) expect(views.get(finished(`t${i}`), VARIANT)?.body).toBe(body);
  });

  it("keeps 4,096 answers at most, and each for ten minutes", () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const madeAt = Date.now();
    const views = new FinishedViews();
    for (let i = 0; i <= 4096; i += 1) views.set(finished(`t${i}`), VARIANT, "{}");
    expect(views.get(finished("t0"), VARIANT)).toBeUndefined();
    expect(views.get(finished("t1"), VARIANT)?.body).toBe("{}");
    vi.setSystemTime(madeAt + 10 * 60 * 1000);
    expect(views.get(finished("t1"), VARIANT)?.body).toBe("{}");
    vi.setSystemTime(madeAt + 10 * 60 * 1000 + 1);
    expect(views.get(finished("t1"), VARIANT)).toBeUndefined();
  });
});
