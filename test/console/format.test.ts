import { describe, expect, it } from "vitest";
import {
  detailRows,
  downloadName,
  formatDuration,
  imageSource,
  statusLabel,
  statusTone,
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
});
