import { describe, expect, it } from "vitest";
import { galleryTasks } from "../../console/src/paging.js";
import type { TaskPage } from "../../console/src/task-types.js";

describe("the gallery's tasks of a page", () => {
  it("keeps the service's own tasks, in order, and skips another dialect's", () => {
    const own = (id: string) => ({
      id,
      object: "image.task" as const,
      status: "completed" as const,
      created: 1_700_000_000,
      model: "gpt-image-1",
    });
    // A sub2api task as the list shows it: no `created`, no `model`.
    const sub2api = {
      id: "imgtask_AAAAAAAAAAAAAAAAAAAAAA",
      task_id: "imgtask_AAAAAAAAAAAAAAAAAAAAAA",
      object: "image.generation.task",
      status: "processing",
      created_at: 1_700_000_000,
      poll_url: "/v1/images/tasks/imgtask_AAAAAAAAAAAAAAAAAAAAAA",
    };
    const page = {
      object: "list",
      data: [own("task_1"), sub2api, own("task_2"), { id: "x" }],
      first_id: "task_1",
      last_id: "x",
      has_more: false,
    } as unknown as TaskPage;
    expect(galleryTasks(page).map((task) => task.id)).toEqual(["task_1", "task_2"]);
    expect(galleryTasks({ data: [] })).toEqual([]);
  });
});
