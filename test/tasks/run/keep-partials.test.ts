import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { createMetrics } from "../../../src/metrics/create-metrics.js";
import { keepPartials } from "../../../src/tasks/run/keep-partials.js";
import type { TaskStage } from "../../../src/tasks/core/task-events.js";
import type { TaskImage, TaskRecord } from "../../../src/tasks/core/task-record.js";
import { flatPng } from "../scripted-image-stream.js";

const started: TaskRecord = {
  id: "task_AAAAAAAAAAAAAAAAAAAAAA",
  owner: "o",
  status: "in_progress",
  model: "gpt-image-1",
  request: {},
  responseFormat: "url",
  created: 1,
  started_at: 2,
  attempts: 1,
  partialImages: 3,
};

/** A run's partial-image handler over stores the test controls. */
function harness(options: { failWrites: Set<number>; lostAfter?: number }) {
  const records: TaskRecord[] = [];
  const announced: Array<[TaskStage, number | undefined]> = [];
  const deleted: string[] = [];
  let writes = 0;
  const metrics = createMetrics({ defaultMetrics: false });
  const onPartial = keepPartials(
    {
      store: {
        async transition(_id, _from, patch) {
          if (options.lostAfter !== undefined && records.length >= options.lostAfter)
            return undefined;
          const next = { ...(records.at(-1) ?? started), ...patch } as TaskRecord;
          records.push(next);
          return next;
        },
      },
      images: {
        async putPartial(_record, index, image): Promise<TaskImage> {
          writes += 1;
          if (options.failWrites.has(writes)) throw new Error("the image store is away");
          return {
            mime: image.mime,
            bytes: image.bytes.length,
            key: `day/task/partial-${index}.png`,
          };
        },
        async deleteResults(images) {
          deleted.push(...images.map((image) => image.key!));
        },
      },
      finisher: { announce: (stage, _record, index) => void announced.push([stage, index]) },
      metrics,
      logger: pino({ level: "silent" }),
    },
    started,
    new AbortController().signal,
  );
  const counted = async (outcome: string) =>
    (await metrics.taskPartialImages.get()).values.find((v) => v.labels.outcome === outcome)
      ?.value ?? 0;
  return { onPartial, records, announced, deleted, counted };
}

const draft = (shade: number) => ({ bytes: flatPng(shade), mime: "image/png" });

describe("keepPartials", () => {
  it("skips a draft the image store cannot take, and keeps the next ones in order", async () => {
    const run = harness({ failWrites: new Set([2]) });
    for (const shade of [10, 20, 30]) await run.onPartial(0, draft(shade));
    expect(run.records.at(-1)?.partials?.map((p) => p.key)).toEqual([
      "day/task/partial-0.png",
      "day/task/partial-1.png",
    ]);
    expect(run.announced).toEqual([
      ["partial_image", 0],
      ["partial_image", 1],
    ]);
    expect(await run.counted("stored")).toBe(2);
    expect(await run.counted("failed")).toBe(1);
  });

  it("deletes a draft its run can no longer record (the task is another run's, or cancelled)", async () => {
    const run = harness({ failWrites: new Set(), lostAfter: 1 });
    await run.onPartial(0, draft(10));
    await run.onPartial(1, draft(20));
    expect(run.announced).toEqual([["partial_image", 0]]);
    expect(run.deleted).toEqual(["day/task/partial-1.png"]);
  });
});
