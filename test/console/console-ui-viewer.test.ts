import { slow } from "../support/time-factor.js";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { RunningServer } from "../../src/server.js";
import { startS3Server } from "../support/s3-server.js";
import {
  accessibleControls,
  focusState,
  launchChromium,
  makeTask,
  openPage,
  signIn,
  unlabelledFields,
  type ApiTask,
} from "./console-browser.js";
import { startDemoService } from "./console-browser.js";

const exec = promisify(execFile);

async function openTask(page: Page, server: RunningServer, id: string): Promise<void> {
  await page.goto(`${server.url}/console/#/tasks/${id}`);
  await page
    .getByRole("article", { name: "Task" })
    .locator("img[data-kind=result]")
    .first()
    .waitFor();
}

/** The bytes of each image of a finished task, from its links or its base64. */
async function imageBytes(task: ApiTask): Promise<Uint8Array[]> {
  return Promise.all(
    task.data!.map(async (image) =>
      image.url
        ? new Uint8Array(await (await fetch(image.url)).arrayBuffer())
        : new Uint8Array(Buffer.from(image.b64_json!, "base64")),
    ),
  );
}

/** Clicks "Download all", saves the ZIP and extracts it with unzip: the files by name. */
async function downloadAll(page: Page): Promise<Map<string, Uint8Array>> {
  const dir = await mkdtemp(join(tmpdir(), "console-download-"));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    page.getByRole("button", { name: "Download all (ZIP)" }).click(),
  ]);
  const archive = join(dir, download.suggestedFilename());
  await download.saveAs(archive);
  await exec("unzip", ["-q", archive, "-d", join(dir, "out")]);
  const listed = (await exec("zipinfo", ["-1", archive])).stdout.trim().split("\n");
  const files = new Map<string, Uint8Array>();
  for (const name of listed) {
    files.set(name, new Uint8Array(await readFile(join(dir, "out", name))));
  }
  files.set("(archive name)", new TextEncoder().encode(download.suggestedFilename()));
  return files;
}

const viewer = (page: Page) => page.getByRole("dialog");

describe("the console shows images whole, with what they cost", { timeout: 90_000 }, () => {
  let browser: Browser;
  let service: RunningServer;

  beforeAll(async () => {
    [browser, service] = await Promise.all([launchChromium(), startDemoService(100)]);
  }, slow(60_000));
  afterAll(async () => {
    await browser?.close();
    await service?.close(200);
  });

  it("opens an image full size from the keyboard and goes round the task's images", async () => {
    const { page, problems } = await openPage(browser);
    const task = await makeTask(service, {
      prompt: "three kites",
      n: 3,
      size: "1024x1536",
      response_format: "url",
    });
    await signIn(page, service.url);
    await openTask(page, service, task.id);

    const first = page.getByRole("button", { name: "View image 1 full size" });
    await first.focus();
    expect(await focusState(page)).toEqual({
      element: "button View image 1 full size",
      visible: true,
    });
    await page.keyboard.press("Enter");
    await viewer(page).waitFor();
    const title = viewer(page).getByRole("heading");
    const shown = viewer(page).locator("img");
    expect(await title.textContent()).toBe("Image 1 of 3");
    expect(await shown.getAttribute("src")).toBe(task.data![0]!.url);
    // The focus is in the dialog, on a control that shows it.
    expect(await focusState(page)).toEqual({ element: "button Close", visible: true });

    await page.keyboard.press("ArrowRight");
    expect(await title.textContent()).toBe("Image 2 of 3");
    expect(await shown.getAttribute("src")).toBe(task.data![1]!.url);
    await page.keyboard.press("ArrowLeft");
    await page.keyboard.press("ArrowLeft");
    expect(await title.textContent()).toBe("Image 3 of 3");
    await viewer(page).getByRole("button", { name: "Next" }).click();
    expect(await title.textContent()).toBe("Image 1 of 3");
    await viewer(page).getByRole("button", { name: "Previous" }).press("Enter");
    expect(await title.textContent()).toBe("Image 3 of 3");
    expect(
      await viewer(page).getByRole("link", { name: "Download" }).getAttribute("download"),
    ).toBe(`${task.id}-3.png`);
    // Full size: the image is not a thumbnail, it fills the dialog's height or width.
    await expect
      .poll(() =>
        shown.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth),
      )
      .toBe(1024);
    const box = (await shown.boundingBox())!;
    expect(Math.max(box.width, box.height)).toBeGreaterThan(600);
    // Whole: inside the dialog, not cut by it.
    const frame = (await viewer(page).boundingBox())!;
    expect(box.y + box.height).toBeLessThanOrEqual(frame.y + frame.height);
    expect(box.x + box.width).toBeLessThanOrEqual(frame.x + frame.width);

    const controls = await accessibleControls(page);
    expect(controls.unnamed).toEqual([]);
    expect(controls.named).toEqual(
      expect.arrayContaining([
        'button "Previous"',
        'button "Next"',
        'link "Download"',
        'button "Edit this image"',
        'button "Close"',
      ]),
    );

    await page.keyboard.press("Escape");
    await viewer(page).waitFor({ state: "hidden" });
    // Back where it was opened from.
    expect(await focusState(page)).toEqual({
      element: "button View image 1 full size",
      visible: true,
    });
    // A click opens it too; Close closes it.
    await page.getByRole("button", { name: "View image 2 full size" }).click();
    expect(await title.textContent()).toBe("Image 2 of 3");
    await viewer(page).getByRole("button", { name: "Close" }).click();
    await viewer(page).waitFor({ state: "hidden" });
    expect(problems).toEqual([]);
  });

  it("edits the image shown in the dialog", async () => {
    const { page, problems } = await openPage(browser);
    const task = await makeTask(service, { prompt: "two kites", n: 2, response_format: "url" });
    await signIn(page, service.url);
    await openTask(page, service, task.id);
    await page.getByRole("button", { name: "View image 1 full size" }).click();
    await page.keyboard.press("ArrowRight");
    await viewer(page).getByRole("button", { name: "Edit this image" }).click();
    await page.getByRole("heading", { name: "New image" }).waitFor();
    expect(await page.getByLabel("An edit of images").isChecked()).toBe(true);
    const name = await page.evaluate(`document.querySelector("input[name=image]").files[0].name`);
    expect(name).toBe(`${task.id}-2.png`);
    expect(problems).toEqual([]);
  });

  it("downloads all of a task's images in one ZIP, from links or from base64", async () => {
    const { page, problems } = await openPage(browser);
    await signIn(page, service.url);
    for (const responseFormat of ["url", "b64_json"]) {
      const task = await makeTask(service, {
        prompt: `three ${responseFormat} boats`,
        n: 3,
        response_format: responseFormat,
      });
      await openTask(page, service, task.id);
      const files = await downloadAll(page);
      const expected = await imageBytes(task);
      expect(new TextDecoder().decode(files.get("(archive name)"))).toBe(`${task.id}.zip`);
      for (const [index, bytes] of expected.entries()) {
        expect(files.get(`${task.id}-${index + 1}.png`), `image ${index + 1}`).toEqual(bytes);
      }
      expect(files.size).toBe(4);
      await page.getByText(`Saved ${task.id}.zip.`).waitFor();
    }
    // One image: its own download link is enough.
    const single = await makeTask(service, { prompt: "one boat", response_format: "url" });
    await openTask(page, service, single.id);
    expect(await page.getByRole("button", { name: "Download all (ZIP)" }).count()).toBe(0);
    expect(problems).toEqual([]);
  });

  it("shows a task's tokens, and each card's model and size, asked and in pixels", async () => {
    const { page, problems } = await openPage(browser);
    const tall = await makeTask(service, {
      prompt: "a tall tower",
      size: "1024x1536",
      response_format: "url",
    });
    // b64_json: the list carries a signed thumbnail link, which the card shows.
    const wide = await makeTask(service, {
      prompt: "a wide field",
      size: "1536x1024",
      response_format: "b64_json",
    });
    await signIn(page, service.url);
    await openTask(page, service, tall.id);
    const details = await page.getByRole("article", { name: "Task" }).locator("dl").innerText();
    const usage = tall.usage!;
    expect(usage.total_tokens).toBeGreaterThan(0);
    const format = (n: number) => n.toLocaleString("en-US");
    expect(details).toContain(`Input tokens\n${format(usage.input_tokens!)}`);
    expect(details).toContain(`Output tokens\n${format(usage.output_tokens!)}`);
    expect(details).toContain(`Total tokens\n${format(usage.total_tokens!)}`);

    await page.getByRole("link", { name: "Gallery", exact: true }).click();
    const size = (prompt: string) =>
      page.locator(".card-item", { hasText: prompt }).locator(".card-size");
    await expect
      .poll(() => size("a tall tower").textContent(), { timeout: 30_000 })
      .toBe("gpt-image-1 · 1024x1536 · 1024 × 1536 px");
    await expect
      .poll(() => size("a wide field").textContent(), { timeout: 30_000 })
      .toBe("gpt-image-1 · 1536x1024 · 1536 × 1024 px");
    const picture = page.locator(".card-item", { hasText: "a wide field" }).locator("img");
    expect(await picture.getAttribute("src")).toMatch(
      new RegExp(`/v1/images/files/${wide.id}/0\\.png\\?expires=`),
    );
    expect(wide.data![0]!.b64_json).toBeDefined();

    const controls = await accessibleControls(page);
    expect(controls.unnamed).toEqual([]);
    expect(controls.named).toEqual(
      expect.arrayContaining([`checkbox "Select task: a wide field"`, 'button "Delete selected"']),
    );
    expect(await unlabelledFields(page)).toEqual([]);
    expect(problems).toEqual([]);
  });

  it("downloads and edits images whose links are on another origin (presigned S3)", async () => {
    const s3 = await startS3Server();
    onTestFinished(() => s3.close());
    const bucketed = await startDemoService(100, {
      ...s3.imagesConfig("console"),
      links: "presigned",
    });
    onTestFinished(() => bucketed.close(200));
    const task = await makeTask(bucketed, { prompt: "two buckets", n: 2, response_format: "url" });
    expect(new URL(task.data![0]!.url!).origin).not.toBe(new URL(bucketed.url).origin);
    const { page, problems } = await openPage(browser);
    await signIn(page, bucketed.url);
    await openTask(page, bucketed, task.id);
    // Shown from the bucket; fetched (the page may fetch its own origin only) from the service.
    expect(await page.locator("img[data-kind=result]").first().getAttribute("src")).toBe(
      task.data![0]!.url,
    );
    const files = await downloadAll(page);
    const expected = await imageBytes(task);
    expect(files.get(`${task.id}-1.png`)).toEqual(expected[0]);
    expect(files.get(`${task.id}-2.png`)).toEqual(expected[1]);
    await page.getByRole("button", { name: "Edit image 2" }).click();
    await page.getByRole("heading", { name: "New image" }).waitFor();
    const picked = (await page.evaluate(`(async () => {
      const file = document.querySelector("input[name=image]").files[0];
      return [...new Uint8Array(await file.arrayBuffer())];
    })()`)) as number[];
    expect(new Uint8Array(picked)).toEqual(expected[1]);
    expect(problems).toEqual([]);
  });
});
