import { slow as stretched } from "../support/time-factor.js";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningServer } from "../../src/server.js";
import {
  apiCall,
  focusState,
  launchChromium,
  openPage,
  signIn,
  startDemoService,
} from "./console-browser.js";

const live = (page: Page) => page.getByRole("region", { name: "Live" });

async function liveTaskId(page: Page): Promise<string> {
  const id = live(page).locator(".task-id");
  await id.waitFor({ timeout: 30_000 });
  return (await id.textContent())!;
}

describe("the console's fixes", { timeout: 90_000 }, () => {
  let browser: Browser;
  /** The demo's 3 s per image: partial images a second apart. */
  let demo: RunningServer;
  /** Ten minutes per image: a task still running when it is cancelled. */
  let slow: RunningServer;

  beforeAll(async () => {
    [browser, demo, slow] = await Promise.all([
      launchChromium(),
      startDemoService(3000),
      startDemoService(600_000),
    ]);
  }, stretched(60_000));
  afterAll(async () => {
    await browser?.close();
    await Promise.all([demo?.close(200), slow?.close(200)]);
  });

  it("keeps the focus on a visible control after Cancel, live and on the task's page", async () => {
    const { page, problems } = await openPage(browser);
    await signIn(page, slow.url);
    await page.getByLabel("Prompt").fill("a picture that takes ten minutes");
    await page.getByLabel("Partial images").selectOption("0");
    await page.getByRole("button", { name: "Generate" }).press("Enter");
    const badge = live(page).locator(".badge");
    await expect.poll(() => badge.textContent(), { timeout: 30_000 }).toBe("In progress");
    await live(page).getByRole("button", { name: "Cancel task" }).press("Enter");
    await expect.poll(() => badge.textContent(), { timeout: 30_000 }).toBe("Cancelled");
    expect(await focusState(page)).toEqual({ element: "a Open this task", visible: true });

    await page.getByLabel("Prompt").fill("another ten minutes");
    await page.getByRole("button", { name: "Generate" }).press("Enter");
    const id = await expect
      .poll(async () => {
        const shown = await live(page).locator(".task-id").textContent();
        return shown && (await badge.textContent()) === "In progress" ? shown : "";
      })
      .not.toBe("")
      .then(() => live(page).locator(".task-id").textContent());
    await page.goto(`${slow.url}/console/#/tasks/${id}`);
    const task = page.getByRole("article", { name: "Task" });
    await task.getByRole("button", { name: "Cancel task" }).press("Enter");
    await expect.poll(() => task.locator(".badge").textContent()).toBe("Cancelled");
    expect(await focusState(page)).toEqual({ element: "button Use these settings", visible: true });
    expect(problems).toEqual([]);
  });

  it("keeps watching the task and keeps the form across a reload", async () => {
    const { page, problems } = await openPage(browser);
    await signIn(page, demo.url);
    await page.getByLabel("Prompt").fill("a lighthouse through a reload");
    await page.getByLabel("Size", { exact: true }).fill("1024x1536");
    await page.getByLabel("Quality").selectOption("medium");
    await page.getByLabel("Partial images").selectOption("2");
    await page.getByRole("button", { name: "Generate" }).click();
    const id = await liveTaskId(page);

    await page.reload();
    await page.getByRole("button", { name: "Sign out" }).waitFor({ timeout: 30_000 });
    expect(await page.getByLabel("Prompt").inputValue()).toBe("a lighthouse through a reload");
    expect(await page.getByLabel("Size", { exact: true }).inputValue()).toBe("1024x1536");
    expect(await page.getByLabel("Quality").inputValue()).toBe("medium");
    expect(await page.getByLabel("Partial images").inputValue()).toBe("2");
    expect(await liveTaskId(page)).toBe(id);
    // Still followed: it finishes on screen without another reload.
    await live(page).locator("img[data-kind=result]").waitFor({ timeout: 45_000 });
    expect(await live(page).locator(".badge").textContent()).toBe("Completed");
    expect(problems).toEqual([]);
  });

  it("brings the live task into view after Generate on a phone (390 px)", async () => {
    const { page, problems } = await openPage(browser, { width: 390, height: 844 });
    await signIn(page, demo.url);
    const heading = live(page).getByRole("heading", { name: "Live" });
    const inView = async () => {
      const box = await heading.boundingBox();
      return box !== null && box.y >= 0 && box.y + box.height <= 844;
    };
    expect(await inView()).toBe(false);
    await page.getByLabel("Prompt").fill("a small lighthouse");
    await page.getByRole("button", { name: "Generate" }).click();
    await liveTaskId(page);
    await expect.poll(inView, { timeout: 10_000 }).toBe(true);
    expect(problems).toEqual([]);
  });

  it("submits with Ctrl+Enter", async () => {
    const { page, problems } = await openPage(browser);
    await signIn(page, demo.url);
    await page.getByLabel("Prompt").fill("made from the keyboard");
    await page.getByLabel("Prompt").press("Control+Enter");
    const id = await liveTaskId(page);
    const task = await apiCall(demo, "GET", `/v1/images/tasks/${id}`);
    expect(task.json.prompt).toBe("made from the keyboard");
    // Not twice, and the prompt has no new line from the Enter.
    expect(await page.getByLabel("Prompt").inputValue()).toBe("made from the keyboard");
    const listed = await apiCall(demo, "GET", "/v1/images/tasks?limit=100");
    const same = (listed.json as unknown as { data: Array<{ prompt?: string }> }).data.filter(
      (item) => item.prompt === "made from the keyboard",
    );
    expect(same).toHaveLength(1);
    expect(problems).toEqual([]);
  });

  it("clears the previous result when the API refuses a submission", async () => {
    const { page, problems } = await openPage(browser);
    await signIn(page, demo.url);
    await page.getByLabel("Prompt").fill("a first picture");
    await page.getByLabel("Partial images").selectOption("0");
    await page.getByRole("button", { name: "Generate" }).click();
    await live(page).locator("img[data-kind=result]").waitFor({ timeout: 45_000 });

    // Without webhooks.secret in the config, the API refuses a webhook URL.
    await page.getByText("More options").click();
    await page.getByLabel("Webhook URL").fill("https://example.com/hook");
    await page.getByRole("button", { name: "Generate" }).click();
    await page.getByText("Not submitted:", { exact: false }).waitFor();
    expect(await live(page).locator("img, .task-id").count()).toBe(0);
    await live(page).getByText("Your image appears here as it is made.").waitFor();
    expect(await page.getByLabel("Webhook URL").getAttribute("aria-invalid")).toBe("true");
    // The refused request is the one error the browser reports.
    expect(problems).toEqual([expect.stringMatching(/^console: Failed to load resource: .*400/)]);
  });
});
