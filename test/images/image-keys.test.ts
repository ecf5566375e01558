import { describe, expect, it } from "vitest";
import { dayOfKey, inputKey, resultKey } from "../../src/images/image-keys.js";

describe("image store keys", () => {
  const expires = Date.UTC(2026, 10, 25, 23, 59, 59) / 1000;

  it("start with the day the task expires (UTC), then the task and the image", () => {
    expect(resultKey(expires, "task_abc", 0, "image/png")).toBe("2026-11-25/task_abc/0.png");
    expect(resultKey(expires + 1, "task_abc", 9, "image/webp")).toBe("2026-11-26/task_abc/9.webp");
    expect(inputKey(expires, "task_abc", 1, "image/jpeg")).toBe("2026-11-25/task_abc/input-1.jpeg");
    expect(dayOfKey("2026-11-25/task_abc/0.png")).toBe("2026-11-25");
    expect(dayOfKey("misc/file.png")).toBeUndefined();
  });

  it("give a run after the first keys of its own", () => {
    expect(resultKey(expires, "task_abc", 0, "image/png", 1)).toBe("2026-11-25/task_abc/0.png");
    expect(resultKey(expires, "task_abc", 0, "image/png", 2)).toBe(
      "2026-11-25/task_abc/0.run2.png",
    );
  });
});
