import { describe, expect, it } from "vitest";
import {
  askedSize,
  cardPicture,
  detailRows,
  downloadName,
  formatDuration,
  imageCount,
  imageSource,
  statusLabel,
  statusTone,
  usageRows,
} from "../../console/src/format.js";
import type { Task } from "../../console/src/task-types.js";

const task: Task = {
  id: "task_AAAAAAAAAAAAAAAAAAAAAA",
  object: "image.task",
  status: "completed",
  created: 1_767_225_600, // 2026-01-01T00:00:00Z
  model: "gpt-image-1",
  kind: "edit",
  prompt: "a red hat",
  parameters: { size: "1024x1024", n: 2, partial_images: 1, response_format: "url" },
  started_at: 1_767_225_605,
  completed_at: 1_767_225_705,
  expires_at: 1_767_312_105,
};

describe("formatting a task", () => {
  it("calls a cancelled task cancelled, not failed", () => {
    expect(statusLabel({ status: "in_progress" })).toBe("In progress");
    expect(
      statusLabel({
        status: "failed",
        error: { code: "timeout", message: "", type: "server_error" },
      }),
    ).toBe("Failed");
    const cancelled = {
      status: "failed",
      error: { code: "cancelled", message: "", type: "invalid_request_error" },
    } as const;
    expect(statusLabel(cancelled)).toBe("Cancelled");
    expect(statusTone(cancelled)).toBe("cancelled");
  });

  it("says durations as people do", () => {
    expect(formatDuration(0)).toBe("0 s");
    expect(formatDuration(59.6)).toBe("1 min");
    expect(formatDuration(185)).toBe("3 min 5 s");
    expect(formatDuration(3720)).toBe("1 h 2 min");
  });

  it("lists what made the task, its parameters and its times", () => {
    expect(detailRows(task, "en-GB", "UTC")).toEqual([
      ["Kind", "Edit"],
      ["Model", "gpt-image-1"],
      ["Size", "1024x1024"],
      ["Images", "2"],
      ["Partial images", "1"],
      ["Response format", "url"],
      ["Created", "1 Jan 2026, 00:00:00"],
      ["Started", "1 Jan 2026, 00:00:05 (waited 5 s)"],
      ["Finished", "1 Jan 2026, 00:01:45 (took 1 min 40 s)"],
      ["Kept until", "2 Jan 2026, 00:01:45"],
    ]);
  });

  it("counts a card's images as asked, and a completed task's fewer as it has them", () => {
    const one = { url: "https://cdn.example/a.png" };
    const asked = (n?: number) => ({ response_format: "url" as const, ...(n ? { n } : {}) });
    expect(imageCount({ status: "in_progress", parameters: asked(2) })).toBe("2 images");
    expect(imageCount({ status: "completed", parameters: asked(2), data: [one, one] })).toBe(
      "2 images",
    );
    expect(imageCount({ status: "completed", parameters: asked(2), data: [one] })).toBe(
      "1 of 2 images",
    );
    expect(imageCount({ status: "completed", parameters: asked(), data: [one] })).toBe("");
    expect(imageCount({ status: "queued" })).toBe("");
  });

  it("shows a link as it is and base64 as a data: URL of the type its bytes have", () => {
    expect(imageSource({ url: "https://cdn.example/a.png" })).toBe("https://cdn.example/a.png");
    expect(imageSource({ b64_json: "iVBORw0KGgoAAA" })).toBe(
      "data:image/png;base64,iVBORw0KGgoAAA",
    );
    expect(imageSource({ b64_json: "/9j/4AAQ" })).toBe("data:image/jpeg;base64,/9j/4AAQ");
    expect(imageSource({ b64_json: "UklGRiQAAABXRUJQ" })).toMatch(/^data:image\/webp;/);
    expect(imageSource({})).toBeUndefined();
  });

  it("names downloads after the task, with the image's type", () => {
    expect(downloadName(task, 0, "http://h/v1/images/files/task_A/0.png?expires=1")).toBe(
      "task_AAAAAAAAAAAAAAAAAAAAAA-1.png",
    );
    expect(downloadName(task, 1, "data:image/jpeg;base64,/9j/")).toBe(
      "task_AAAAAAAAAAAAAAAAAAAAAA-2.jpg",
    );
    expect(
      downloadName(
        { id: "task_B", parameters: { output_format: "webp", response_format: "url" } },
        0,
        "https://x/y",
      ),
    ).toBe("task_B-1.webp");
  });

  it("shows the tokens a task used, each where the channel gave it", () => {
    const used = { ...task, usage: { input_tokens: 50, output_tokens: 4160, total_tokens: 4210 } };
    expect(detailRows(used, "en-GB", "UTC").slice(-3)).toEqual([
      ["Input tokens", "50"],
      ["Output tokens", "4,160"],
      ["Total tokens", "4,210"],
    ]);
    expect(usageRows({ output_tokens: 7 }, "en-US")).toEqual([["Output tokens", "7"]]);
    expect(usageRows(undefined)).toEqual([]);
    expect(usageRows({ input_tokens: "x" } as never)).toEqual([]);
  });

  it("says the size a task asked for, auto when it left it to the model", () => {
    expect(askedSize(task)).toBe("1024x1024");
    expect(askedSize({})).toBe("auto");
  });
});

describe("a gallery card's picture", () => {
  const base = { ...task, kind: "generation" as const };
  it("is the first image's link, else the list's thumbnail link, else the base64", () => {
    expect(cardPicture({ ...base, data: [{ url: "https://h/0.png" }, { url: "x" }] })).toEqual({
      source: "https://h/0.png",
      final: true,
      needsTask: false,
    });
    const listedB64 = {
      ...base,
      parameters: { response_format: "b64_json" as const },
      data: [{ thumbnail_url: "https://h/t/0.png" }],
    };
    expect(cardPicture(listedB64).source).toBe("https://h/t/0.png");
    expect(cardPicture({ ...base, data: [{ b64_json: "iVBORw0KGgo" }] }).source).toBe(
      "data:image/png;base64,iVBORw0KGgo",
    );
  });

  it("is read from the task for a b64_json task listed without a thumbnail link", () => {
    const b64 = { ...base, parameters: { response_format: "b64_json" as const }, data: [{}] };
    expect(cardPicture(b64)).toEqual({ final: true, needsTask: true });
    // A url task's item always has its link; a failed task has no picture at all.
    expect(cardPicture({ ...base, data: [{}] }).needsTask).toBe(false);
    expect(cardPicture({ ...base, status: "failed" })).toEqual({ final: false, needsTask: false });
  });

  it("is a running task's latest partial image, by link or thumbnail link", () => {
    const running = {
      ...base,
      status: "in_progress" as const,
      partial_images: [
        { index: 0, url: "https://h/p0.png" },
        { index: 1, thumbnail_url: "https://h/p1.png" },
      ],
    };
    expect(cardPicture(running)).toEqual({
      source: "https://h/p1.png",
      final: false,
      needsTask: false,
    });
    expect(cardPicture({ ...running, partial_images: [] }).source).toBeUndefined();
  });
});
