import { slow } from "../support/time-factor.js";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningServer } from "../../src/server.js";
import {
  apiCall,
  focusState,
  launchChromium,
  makeTask,
  openPage,
  signIn,
  startDemoService,
} from "./console-browser.js";

const card = (page: Page, prompt: string) => page.locator(".card-item", { hasText: prompt });

/** The ids of the cards on the page, in order. */
function cardIds(page: Page): Promise<string[]> {
  return page.evaluate(
    `[...document.querySelectorAll(".card-item")].map((card) => card.dataset.taskId)`,
  );
}

/** Records every picture a card shows, from now and as it changes (`window.__pictures`). */
function recordPictures(page: Page): Promise<void> {
  return page.evaluate(`(() => {
    window.__pictures = [...document.querySelectorAll(".card-item img")].map((img) => img.src);
    new MutationObserver((records) => {
      for (const record of records) {
        const img = record.target;
        if (img instanceof HTMLImageElement && img.closest(".card-item")) window.__pictures.push(img.src);
      }
    }).observe(document.body, { subtree: true, attributes: true, attributeFilter: ["src"] });
  })()`);
}

describe(
  "the console's gallery follows the tasks, keeps its place, deletes",
  { timeout: 120_000 },
  () => {
    let browser: Browser;
    /**
     * The demo's 6 s per image (longer on a loaded machine): partial images two seconds apart
     * or more, so the gallery's list, polled every 2 s, shows one before the result. At 3 s per
     * image a loaded run (CI's) polled past both partials.
     */
    let demo: RunningServer;
    let fast: RunningServer;

    beforeAll(async () => {
      [browser, demo, fast] = await Promise.all([
        launchChromium(),
        startDemoService(slow(6000)),
        startDemoService(10),
      ]);
    }, slow(60_000));
    afterAll(async () => {
      await browser?.close();
      await Promise.all([demo?.close(200), fast?.close(200)]);
    });

    it("updates a running task's card live by polling the list, not one stream per card", async () => {
      const { page, problems } = await openPage(browser);
      const requests: string[] = [];
      page.on("request", (request) => requests.push(`${request.method()} ${request.url()}`));
      await signIn(page, demo.url);
      const [running, other] = await Promise.all([
        makeTask(
          demo,
          { prompt: "a slow sunrise", partial_images: 2, response_format: "url" },
          false,
        ),
        makeTask(
          demo,
          { prompt: "another sunrise", partial_images: 1, response_format: "url" },
          false,
        ),
      ]);
      await page.getByRole("link", { name: "Gallery", exact: true }).click();
      await card(page, "a slow sunrise").waitFor();
      await recordPictures(page);
      const badge = card(page, "a slow sunrise").locator(".badge");
      expect(["Queued", "In progress"]).toContain(await badge.textContent());

      // Without a reload: the latest partial image, then the result.
      await expect.poll(() => badge.textContent(), { timeout: 60_000 }).toBe("Completed");
      await expect
        .poll(() => card(page, "another sunrise").locator(".badge").textContent(), {
          timeout: 60_000,
        })
        .toBe("Completed");
      const done = await apiCall(demo, "GET", `/v1/images/tasks/${running.id}`);
      const pictures = (await page.evaluate("window.__pictures")) as string[];
      const mine = pictures.filter((src) => src.includes(running.id));
      expect(mine.some((src) => /\/partial-\d\.png/.test(src))).toBe(true);
      expect(mine.at(-1)).toBe(done.json.data![0]!.url);
      expect(await card(page, "a slow sunrise").locator("img").getAttribute("src")).toBe(
        done.json.data![0]!.url,
      );

      // One list request at a time for the page; no event stream, no request per task.
      const api = requests.filter((line) => line.includes("/v1/"));
      expect(api.filter((line) => /\/events\b/.test(line))).toEqual([]);
      expect(api.filter((line) => line.includes(`/images/tasks/${running.id}`))).toEqual([]);
      expect(api.filter((line) => line.includes(`/images/tasks/${other.id}`))).toEqual([]);
      expect(api.filter((line) => /GET .*\/v1\/images\/tasks\?/.test(line)).length).toBeGreaterThan(
        2,
      );
      expect(problems).toEqual([]);
    });

    it("keeps its page and filter in the URL, across a reload and a fresh sign-in", async () => {
      // 50 finished tasks and one cancelled: three pages of 24 once filtered.
      const made = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          makeTask(fast, { prompt: `paged task ${i}`, response_format: "url" }, false),
        ),
      );
      for (const task of made) await apiCall(fast, "GET", `/v1/images/tasks/${task.id}?wait=60`);
      const { page, problems } = await openPage(browser);
      await signIn(page, fast.url);
      await page.getByRole("link", { name: "Gallery", exact: true }).click();
      await page.locator(".card-item").first().waitFor();
      await page.getByLabel("Status").selectOption("completed");
      await expect.poll(() => page.url()).toMatch(/#\/gallery\?status=completed$/);
      const pageOne = await (async () => {
        await expect.poll(() => page.getByText("Page 1: 24 tasks.").count()).toBe(1);
        return cardIds(page);
      })();
      const older = page.getByRole("button", { name: "Older" });
      await older.press("Enter");
      await page.getByText("Page 2: 24 tasks.").waitFor();
      // The focus stays on the button pressed.
      expect(await focusState(page)).toEqual({ element: "button Older", visible: true });
      const pageTwo = await cardIds(page);
      await older.click();
      await page.getByText("Page 3: 2 tasks.").waitFor();
      const pageThree = await cardIds(page);
      expect(new Set([...pageOne, ...pageTwo, ...pageThree]).size).toBe(50);
      const url = page.url();
      expect(url).toMatch(/#\/gallery\?status=completed&after=task_[\w-]+&trail=task_[\w-]+$/);

      await page.reload();
      await page.getByText("Page 3: 2 tasks.").waitFor();
      expect(await cardIds(page)).toEqual(pageThree);
      expect(await page.getByLabel("Status").inputValue()).toBe("completed");
      // Newer goes back page by page, after the reload too.
      await page.getByRole("button", { name: "Newer" }).click();
      await page.getByText("Page 2: 24 tasks.").waitFor();
      expect(await cardIds(page)).toEqual(pageTwo);
      // So does the browser's Back.
      await page.goBack();
      await page.getByText("Page 3: 2 tasks.").waitFor();
      // A task opened from there goes back there.
      await page.locator(".card").first().click();
      await page.getByRole("article", { name: "Task" }).waitFor();
      await page.getByRole("link", { name: "← Gallery" }).click();
      await page.getByText("Page 3: 2 tasks.").waitFor();

      // The link in a new browser, without a key: sign in first, then the same page.
      const fresh = await openPage(browser);
      await fresh.page.goto(url);
      await fresh.page.getByLabel("API key").waitFor();
      expect(await fresh.page.evaluate("sessionStorage.length")).toBe(0);
      await fresh.page.getByLabel("API key").fill("sk-demo-image-task-sidecar");
      await fresh.page.getByLabel("API key").press("Enter");
      await fresh.page.getByText("Page 3: 2 tasks.").waitFor({ timeout: 30_000 });
      expect(await cardIds(fresh.page)).toEqual(pageThree);
      expect(fresh.page.url()).toBe(url);
      await fresh.page.getByRole("button", { name: "Newer" }).click();
      await fresh.page.getByText("Page 2: 24 tasks.").waitFor();
      expect(await cardIds(fresh.page)).toEqual(pageTwo);

      // Oldest first: the first page holds the oldest tasks, the way on is to newer ones.
      const oldestFirst = [...pageOne, ...pageTwo, ...pageThree].reverse();
      await page.getByLabel("Order").selectOption("asc");
      await expect.poll(() => page.url()).toMatch(/#\/gallery\?status=completed&order=asc$/);
      await page.getByText("Page 1: 24 tasks.").waitFor();
      expect(await cardIds(page)).toEqual(oldestFirst.slice(0, 24));
      await page.getByRole("button", { name: "Newer" }).click();
      await page.getByText("Page 2: 24 tasks.").waitFor();
      expect(await cardIds(page)).toEqual(oldestFirst.slice(24, 48));
      await page.getByRole("button", { name: "Older" }).click();
      await page.getByText("Page 1: 24 tasks.").waitFor();
      expect(await page.getByLabel("Order").inputValue()).toBe("asc");
      expect(problems).toEqual([]);
      expect(fresh.problems).toEqual([]);
    });

    it("deletes a task from its page: the task and its image links answer 404", async () => {
      const { page, problems } = await openPage(browser);
      const task = await makeTask(fast, { prompt: "a task to delete", response_format: "url" });
      const link = task.data![0]!.url!;
      expect((await fetch(link)).status).toBe(200);
      await signIn(page, fast.url);
      await page.goto(`${fast.url}/console/#/tasks/${task.id}`);
      await page.getByRole("button", { name: "Delete task" }).press("Enter");
      const dialog = page.getByRole("dialog", { name: "Delete this task?" });
      await dialog.waitFor();
      // Asked first; Keep (or Escape) keeps it.
      expect(await focusState(page)).toEqual({ element: "button Keep", visible: true });
      await page.keyboard.press("Escape");
      await dialog.waitFor({ state: "hidden" });
      expect((await apiCall(fast, "GET", `/v1/images/tasks/${task.id}`)).status).toBe(200);

      await page.getByRole("button", { name: "Delete task" }).click();
      await dialog.getByRole("button", { name: "Delete" }).click();
      // The gallery says it was deleted (or the task page says why not).
      const said = page.getByText(/^(Deleted task_|Not deleted)/);
      await said.waitFor();
      expect(await said.textContent()).toMatch(new RegExp(`^Deleted ${task.id}\\. Page 1`));
      await page.getByRole("heading", { name: "Gallery" }).waitFor();
      const gone = await apiCall(fast, "GET", `/v1/images/tasks/${task.id}`);
      expect(gone.status).toBe(404);
      expect(gone.json.error?.code).toBe("task_not_found");
      expect((await fetch(link)).status).toBe(404);
      expect(await card(page, "a task to delete").count()).toBe(0);
      expect(problems).toEqual([]);
    });

    it("deletes a selection of tasks from the gallery", async () => {
      const { page, problems } = await openPage(browser);
      const tasks = await Promise.all(
        ["selected one", "selected two", "kept three"].map((prompt) =>
          makeTask(fast, { prompt, response_format: "url" }),
        ),
      );
      await signIn(page, fast.url);
      await page.getByRole("link", { name: "Gallery", exact: true }).click();
      await card(page, "kept three").waitFor();
      await page.getByRole("checkbox", { name: "Select task: selected one" }).check();
      await page.getByRole("checkbox", { name: "Select task: selected two" }).press("Space");
      const remove = page.getByRole("button", { name: "Delete selected (2)" });
      await remove.click();
      const dialog = page.getByRole("dialog", { name: "Delete these 2 tasks?" });
      await dialog.getByRole("button", { name: "Delete" }).click();
      const said = page.getByText(/^(Deleted|Not deleted)/);
      await said.waitFor();
      // The earlier tests' tasks on this service share the page.
      expect(await said.textContent()).toMatch(/^Deleted 2 tasks\. Page 1: \d+ tasks?\.$/);
      await expect.poll(() => card(page, "selected").count()).toBe(0);
      expect(await card(page, "kept three").count()).toBe(1);
      for (const task of tasks.slice(0, 2)) {
        const gone = await apiCall(fast, "GET", `/v1/images/tasks/${task.id}`);
        expect(gone.status).toBe(404);
        expect((await fetch(task.data![0]!.url!)).status).toBe(404);
      }
      expect((await apiCall(fast, "GET", `/v1/images/tasks/${tasks[2]!.id}`)).status).toBe(200);
      expect(problems).toEqual([]);
    });
  },
);
