import { slow as stretched } from "../support/time-factor.js";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodePng } from "../../src/demo/png-encoder.js";
import type { RunningServer } from "../../src/server.js";
import {
  DEMO_KEY,
  accessibleControls,
  focusState,
  launchChromium,
  openPage,
  overflowsSideways,
  signIn,
  startDemoService,
  unlabelledFields,
} from "./console-browser.js";

/**
 * `UPDATE_SCREENSHOTS=1` (npm run screenshots) writes the screenshots docs/console.md shows;
 * otherwise they are taken and dropped, so a test run leaves the checkout as it was.
 */
const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === "1" ? resolve("docs/images") : undefined;

async function screenshot(page: Page, name: string, fullPage = false): Promise<void> {
  if (SCREENSHOTS) await mkdir(SCREENSHOTS, { recursive: true });
  await page.evaluate("window.scrollTo(0, 0)");
  await page.screenshot({
    fullPage,
    animations: "disabled",
    ...(SCREENSHOTS ? { path: join(SCREENSHOTS, `console-${name}.png`) } : {}),
  });
}

/** Records the order in which the page shows partial images and results (`img[data-kind]`). */
function recordImageOrder(page: Page): Promise<void> {
  return page.evaluate(`(() => {
    window.__shown = [];
    new MutationObserver((records) => {
      for (const record of records) {
        for (const node of record.addedNodes) {
          if (!(node instanceof Element)) continue;
          const images = node.matches("img[data-kind]") ? [node] : [...node.querySelectorAll("img[data-kind]")];
          for (const img of images) window.__shown.push(img.dataset.kind);
        }
      }
    }).observe(document.body, { childList: true, subtree: true });
  })()`);
}

async function generate(page: Page, prompt: string, partialImages = "2"): Promise<void> {
  await page.getByLabel("Prompt").fill(prompt);
  await page.getByLabel("Partial images").selectOption(partialImages);
  await page.getByRole("button", { name: "Generate" }).click();
}

/** A call to the API as a script makes it, with the demo key. */
async function apiCall(server: RunningServer, method: string, path: string, body?: unknown) {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${DEMO_KEY}`, "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  expect(response.ok, `${method} ${path}`).toBe(true);
  return (await response.json()) as { id: string; status: string; error?: { code: string } };
}

async function submitTask(server: RunningServer, body: Record<string, unknown>): Promise<string> {
  return (await apiCall(server, "POST", "/v1/images/tasks", { model: "gpt-image-1", ...body })).id;
}

const live = (page: Page) => page.getByRole("region", { name: "Live" });

// A real browser on a shared 2-core machine: generous bounds; nothing asserts on time.
describe("the web console in Chromium, on the demo channel", { timeout: 90_000 }, () => {
  let browser: Browser;
  /** The demo's own 3 s per image: partial images 1 s apart. */
  let service: RunningServer;
  /** An image that takes ten minutes: a task that is still running when it is cancelled. */
  let slow: RunningServer;

  beforeAll(async () => {
    [browser, service, slow] = await Promise.all([
      launchChromium(),
      startDemoService(3000),
      startDemoService(600_000),
    ]);
  }, stretched(60_000));
  afterAll(async () => {
    await browser?.close();
    await Promise.all([service?.close(200), slow?.close(200)]);
  });

  it("signs in with the demo key from the keyboard, focus always visible, the key in this tab only", async () => {
    const { page, problems } = await openPage(browser);
    await page.goto(`${service.url}/console/`);
    await screenshot(page, "sign-in");
    // The key field has the focus from the start; Tab and Shift+Tab move on and back, visibly.
    for (const [key, expected] of [
      ["", "input API key"],
      ["Tab", "button Sign in"],
      ["Shift+Tab", "input API key"],
    ] as const) {
      if (key) await page.keyboard.press(key);
      expect(await focusState(page)).toEqual({ element: expected, visible: true });
    }
    await page.keyboard.type(DEMO_KEY);
    await page.keyboard.press("Enter");
    await expect
      .poll(() => page.getByRole("button", { name: "Sign out" }).count(), { timeout: 30_000 })
      .toBe(1);

    // The key lives in sessionStorage: not in a cookie, localStorage or the URL.
    expect(await page.evaluate("Object.values(sessionStorage)")).toEqual([DEMO_KEY]);
    expect(await page.evaluate("localStorage.length")).toBe(0);
    expect(await page.context().cookies()).toEqual([]);
    expect(page.url()).not.toContain(DEMO_KEY);

    // The whole page by keyboard: every stop shows its focus; the prompt and Generate are reached.
    const stops: string[] = [];
    for (let i = 0; i < 40; i += 1) {
      await page.keyboard.press("Tab");
      const state = await focusState(page);
      expect(state.visible, state.element).toBe(true);
      stops.push(state.element);
      if (state.element.startsWith("button Generate")) break;
    }
    expect(stops).toContain("textarea Prompt");
    expect(stops.at(-1)).toBe("button Generate");

    await page.getByRole("button", { name: "Sign out" }).click();
    await expect.poll(() => page.getByLabel("API key").count(), { timeout: 30_000 }).toBe(1);
    expect(await page.evaluate("sessionStorage.length")).toBe(0);
    expect(problems).toEqual([]);
  });

  it("refuses a wrong key, saying so", async () => {
    const { page, problems } = await openPage(browser);
    await page.goto(`${service.url}/console/`);
    await page.getByLabel("API key").fill("sk-not-a-key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect
      .poll(() => page.getByText("This key was refused.").count(), { timeout: 30_000 })
      .toBe(1);
    expect(await page.evaluate("sessionStorage.length")).toBe(0);
    // The refused request is the one error the browser reports.
    expect(problems).toEqual([expect.stringMatching(/^console: Failed to load resource: .*401/)]);
  });

  it("generates with partial images, showing a partial image before the final one", async () => {
    const { page, problems } = await openPage(browser);
    await signIn(page, service.url);
    await recordImageOrder(page);
    await generate(page, "a lighthouse at dawn, seen from the sea", "2");

    // Recorded as it happens, so a slow machine cannot miss a partial image shown for a moment.
    await page.waitForFunction(
      () => (globalThis as unknown as { __shown: string[] }).__shown.length > 0,
      undefined,
      { timeout: 45_000 },
    );
    await screenshot(page, "live");
    const result = live(page).locator("img[data-kind=result]");
    await result.waitFor({ timeout: 45_000 });
    expect(await live(page).locator(".badge").textContent()).toBe("Completed");
    await expect
      .poll(
        () => result.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth),
        { timeout: 30_000 },
      )
      .toBe(1024);
    const shown = (await page.evaluate("window.__shown")) as string[];
    expect(shown[0]).toBe("partial");
    expect(shown.indexOf("partial")).toBeLessThan(shown.indexOf("result"));
    const download = live(page).getByRole("link", { name: "Download image 1" });
    expect(await download.getAttribute("download")).toMatch(/^task_[\w-]+-1\.png$/);
    await screenshot(page, "result");
    expect(problems).toEqual([]);
  });

  it("finds the task in the gallery, filtered by status, and opens it with its prompt and parameters", async () => {
    const { page, problems } = await openPage(browser);
    await signIn(page, service.url);
    // Two more tasks beside the one made here: one done, one cancelled.
    const [boat, storm] = await Promise.all(
      ["a paper boat on a pond", "a storm over the sea"].map((text) =>
        submitTask(service, { prompt: text, response_format: "url" }),
      ),
    );
    await apiCall(service, "POST", `/v1/images/tasks/${storm}/cancel`);
    const prompt = "a red fox in the snow";
    await page.getByLabel("Size", { exact: true }).fill("1024x1536");
    await page.getByLabel("Quality").selectOption("high");
    await generate(page, prompt, "1");
    await live(page).locator("img[data-kind=result]").waitFor({ timeout: 45_000 });

    await apiCall(service, "GET", `/v1/images/tasks/${boat}?wait=30`);
    await page.getByRole("link", { name: "Gallery" }).click();
    const card = page.getByRole("link", { name: new RegExp(prompt) });
    await card.waitFor();
    expect(await card.locator("img").count()).toBe(1);
    await page
      .locator(".card", { hasText: "a storm over the sea" })
      .getByText("Cancelled")
      .waitFor();
    await screenshot(page, "gallery");
    await page.getByLabel("Status").selectOption("completed");
    await page.locator(".card", { hasText: "a storm over the sea" }).waitFor({ state: "detached" });
    expect(await card.count()).toBe(1);
    await page.getByLabel("Status").selectOption("failed");
    await expect.poll(() => card.count(), { timeout: 30_000 }).toBe(0);
    await page.getByLabel("Status").selectOption("");
    await card.click();

    const task = page.getByRole("article", { name: "Task" });
    await task.waitFor();
    expect(await task.locator(".prompt").textContent()).toBe(prompt);
    const details = await task.locator("dl").innerText();
    expect(details).toMatch(/Size\s+1024x1536/);
    expect(details).toMatch(/Quality\s+high/);
    expect(details).toMatch(/Partial images\s+1/);
    expect(await task.locator("img[data-kind=result]").count()).toBe(1);
    await screenshot(page, "task", true);
    await task.getByRole("button", { name: "View image 1 full size" }).click();
    await page.getByRole("dialog", { name: "Image 1 of 1" }).waitFor();
    await screenshot(page, "viewer");
    await page.keyboard.press("Escape");

    await page.getByRole("link", { name: "← Gallery" }).click();
    await page.getByRole("link", { name: new RegExp(prompt) }).waitFor();
    expect(problems).toEqual([]);
  });

  it("cancels a running task", async () => {
    const { page, problems } = await openPage(browser);
    await signIn(page, slow.url);
    await generate(page, "a picture that takes ten minutes", "0");
    const badge = live(page).locator(".badge");
    await expect.poll(() => badge.textContent(), { timeout: 30_000 }).toBe("In progress");
    await live(page).getByRole("button", { name: "Cancel task" }).click();
    await expect.poll(() => badge.textContent(), { timeout: 30_000 }).toBe("Cancelled");
    expect(await live(page).locator(".error-box").innerText()).toMatch(/^cancelled\b/);
    expect(await live(page).getByRole("button", { name: "Cancel task" }).isVisible()).toBe(false);

    // The service agrees.
    const id = (await live(page).locator(".task-id").textContent())!;
    const task = await apiCall(slow, "GET", `/v1/images/tasks/${id}`);
    expect(task).toMatchObject({ status: "failed", error: { code: "cancelled" } });
    expect(problems).toEqual([]);
  });

  it("shows a prompt made of HTML as text, everywhere, and runs nothing", async () => {
    const { page, problems, dialogs } = await openPage(browser);
    await signIn(page, service.url);
    const hostile = `<img src=x onerror=alert(1)><script>alert(2)</script>"'><b>bold</b>`;
    await generate(page, hostile, "1");
    await live(page).locator("img[data-kind=result]").waitFor({ timeout: 45_000 });
    expect(await live(page).locator(".prompt").textContent()).toBe(hostile);

    await page.getByRole("link", { name: "Gallery" }).click();
    const card = page.locator(".card", { hasText: "<img src=x onerror=alert(1)>" }).first();
    await card.waitFor();
    expect(await card.locator(".card-prompt").textContent()).toBe(hostile);
    await card.click();
    const task = page.getByRole("article", { name: "Task" });
    await task.waitFor();
    expect(await task.locator(".prompt").textContent()).toBe(hostile);
    // The viewer, the form filled again and the code: all text.
    await task.getByRole("button", { name: "View image 1 full size" }).click();
    expect(await page.getByRole("dialog").locator("img").getAttribute("alt")).toContain(hostile);
    await page.keyboard.press("Escape");
    await task.getByRole("button", { name: "Use these settings" }).click();
    await page.getByText("Show the code").click();
    await page.getByRole("button", { name: "Copy as JavaScript" }).click();
    expect(await page.getByLabel("The code").textContent()).toContain(JSON.stringify(hostile));

    expect(await page.locator('img[src="x"], script:not([src]), b').count()).toBe(0);
    expect(dialogs).toEqual([]);
    expect(problems).toEqual([]);
  });

  it("edits an uploaded image with a mask", async () => {
    const { page, problems } = await openPage(browser);
    await signIn(page, service.url);
    const png = encodePng({
      width: 8,
      height: 8,
      channels: 3,
      pixels: new Uint8Array(8 * 8 * 3).fill(200),
    });
    await page.getByLabel("An edit of images").check();
    await page
      .getByLabel("Images (1 to 16)")
      .setInputFiles({ name: "cat.png", mimeType: "image/png", buffer: png });
    await page
      .getByLabel("Mask (optional)")
      .setInputFiles({ name: "mask.png", mimeType: "image/png", buffer: png });
    await expect
      .poll(() => page.getByRole("list", { name: "Picked images" }).locator("img").count(), {
        timeout: 30_000,
      })
      .toBe(2);
    await page.getByLabel("Prompt").fill("add a red hat");
    await page.getByRole("button", { name: "Edit images" }).click();
    await live(page).locator("img[data-kind=result]").waitFor({ timeout: 45_000 });
    expect(await live(page).locator("dl").innerText()).toMatch(/Kind\s+Edit/);
    expect(problems).toEqual([]);
  });

  it("gives every control an accessible name and every field a label, on every page", async () => {
    const { page, problems } = await openPage(browser, { clipboard: true });
    await page.goto(`${service.url}/console/`);
    const pages: Record<string, { named: string[]; unnamed: string[] }> = {};
    const check = async (name: string) => {
      pages[name] = await accessibleControls(page);
      expect(await unlabelledFields(page), name).toEqual([]);
    };
    await check("sign-in");
    await signIn(page, service.url);
    await generate(page, "a named thing", "1");
    await live(page).locator("img[data-kind=result]").waitFor({ timeout: 45_000 });
    // Every control in view: the edit's files, the folded options and the code too.
    await page.getByText("Show the code").click();
    await page.getByRole("button", { name: "Copy as Python" }).click();
    await page.getByText("Copied the Python code.", { exact: false }).waitFor();
    await screenshot(page, "code", true);
    await page.getByLabel("An edit of images").check();
    await page.getByText("More options").click();
    await check("create");
    await page.getByRole("link", { name: "Gallery" }).click();
    await page.locator(".card").first().waitFor();
    await check("gallery");
    await page.locator(".card").first().click();
    await page.getByRole("article", { name: "Task" }).waitFor();
    await check("task");
    for (const [name, controls] of Object.entries(pages)) {
      expect(controls.unnamed, name).toEqual([]);
      expect(controls.named.length, name).toBeGreaterThan(0);
    }
    expect(pages.create!.named).toEqual(
      expect.arrayContaining([
        'textbox "Prompt"',
        'combobox "Model"',
        'combobox "Partial images"',
        'radio "An edit of images"',
        'button "Edit images"',
        'link "Download image 1"',
        'textbox "Webhook URL"',
        'button "Copy as curl"',
        'button "Copy as Python"',
        'button "Copy as JavaScript"',
        'button "View image 1 full size"',
        'button "Edit image 1"',
        'link "Open this task"',
      ]),
    );
    expect(pages.task!.named).toEqual(
      expect.arrayContaining([
        'button "Use these settings"',
        'button "Copy prompt"',
        'button "Delete task"',
        'button "View image 1 full size"',
        'link "Download image 1"',
      ]),
    );
    expect(pages.gallery!.named).toEqual(
      expect.arrayContaining(['combobox "Status"', 'button "Delete selected"']),
    );
    expect(pages.gallery!.named.some((name) => name.startsWith('checkbox "Select task: '))).toBe(
      true,
    );
    expect(problems).toEqual([]);
  });

  it("works at phone width (375 px), in light and dark", async () => {
    for (const colorScheme of ["light", "dark"] as const) {
      const { page, problems } = await openPage(browser, { width: 375, height: 740, colorScheme });
      await page.goto(`${service.url}/console/`);
      expect(await overflowsSideways(page)).toBe(false);
      await signIn(page, service.url);
      expect(await overflowsSideways(page)).toBe(false);
      await generate(page, "a tiny lighthouse", "1");
      const result = live(page).locator("img[data-kind=result]");
      await result.waitFor({ timeout: 45_000 });
      const box = (await result.boundingBox())!;
      expect(box.x).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width).toBeLessThanOrEqual(375);
      expect(await overflowsSideways(page)).toBe(false);
      await page.getByRole("link", { name: "Gallery" }).click();
      await page.locator(".card").first().waitFor();
      expect(await overflowsSideways(page)).toBe(false);
      await screenshot(page, `phone-${colorScheme}`);
      expect(problems).toEqual([]);
    }
  });
});
