import { slow } from "../support/time-factor.js";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningServer } from "../../src/server.js";
import {
  apiCall,
  launchChromium,
  makeTask,
  openPage,
  signIn,
  startDemoService,
} from "./console-browser.js";

describe("the console's gallery beside tasks of another dialect", { timeout: 90_000 }, () => {
  let browser: Browser;
  let service: RunningServer;

  beforeAll(async () => {
    [browser, service] = await Promise.all([launchChromium(), startDemoService(10)]);
  }, slow(60_000));
  afterAll(async () => {
    await browser?.close();
    await service?.close(200);
  });

  it("shows the key's own tasks and skips its sub2api tasks, which the list shows in their shape", async () => {
    const { page, problems } = await openPage(browser);
    const before = await makeTask(service, { prompt: "a native task, older" });
    const sub2api = await apiCall(service, "POST", "/v1/images/generations/async", {
      model: "gpt-image-1",
      prompt: "a sub2api task",
    });
    expect(sub2api.status).toBe(202);
    const after = await makeTask(service, { prompt: "a native task, newer" });
    const listed = await apiCall(service, "GET", "/v1/images/tasks");
    const objects = (listed.json as unknown as { data: Array<{ id: string; object: string }> })
      .data;
    expect(objects.map((task) => task.object)).toEqual([
      "image.task",
      "image.generation.task",
      "image.task",
    ]);

    await signIn(page, service.url);
    await page.getByRole("link", { name: "Gallery", exact: true }).click();
    const cards = page.locator(".card-item");
    await page.locator(".card-item", { hasText: "a native task, older" }).waitFor();
    expect(
      await cards.evaluateAll((all) => all.map((card) => card.getAttribute("data-task-id"))),
    ).toEqual([after.id, before.id]);
    await expect.poll(() => page.getByText(/^Page 1: 2 tasks\.$/).count()).toBe(1);
    expect(problems).toEqual([]);
  });
});
