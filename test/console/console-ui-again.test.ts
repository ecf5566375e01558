import { slow } from "../support/time-factor.js";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodePng } from "../../src/demo/png-encoder.js";
import type { RunningServer } from "../../src/server.js";
import {
  DEMO_KEY,
  apiCall,
  clipboardText,
  focusState,
  launchChromium,
  makeTask,
  openPage,
  signIn,
  startDemoService,
} from "./console-browser.js";
import { run, runCurl, runNode, snippetDir } from "./run-snippet.js";

const live = (page: Page) => page.getByRole("region", { name: "Live" });

/** The id of the task the live panel shows, once it shows one. */
async function liveTaskId(page: Page): Promise<string> {
  const id = live(page).locator(".task-id");
  await id.waitFor({ timeout: 30_000 });
  return (await id.textContent())!;
}

async function openTask(page: Page, server: RunningServer, id: string): Promise<void> {
  await page.goto(`${server.url}/console/#/tasks/${id}`);
  await page.getByRole("article", { name: "Task" }).waitFor();
}

const PARAMETERS = {
  size: "1024x1536",
  quality: "high",
  n: 2,
  background: "opaque",
  output_format: "webp",
  output_compression: 70,
  moderation: "low",
  partial_images: 2,
  response_format: "b64_json",
};

describe("the console makes a task again, and shows it as code", { timeout: 90_000 }, () => {
  let browser: Browser;
  let service: RunningServer;

  beforeAll(async () => {
    [browser, service] = await Promise.all([launchChromium(), startDemoService(200)]);
  }, slow(60_000));
  afterAll(async () => {
    await browser?.close();
    await service?.close(200);
  });

  it("fills the form with a task's settings, and submitting it makes the same task", async () => {
    const { page, problems } = await openPage(browser, { clipboard: true });
    const prompt = `a fox "in" the snow\nsecond line`;
    const task = await makeTask(service, { prompt, ...PARAMETERS });
    await signIn(page, service.url);
    await openTask(page, service, task.id);

    await page.getByRole("button", { name: "Copy prompt" }).click();
    await page.getByText("Prompt copied.").waitFor();
    expect(await clipboardText(page)).toBe(prompt);

    await page.getByRole("button", { name: "Use these settings" }).click();
    await page.getByRole("heading", { name: "New image" }).waitFor();
    expect(page.url()).toMatch(/#\/new$/);
    // The focus is in the form, on the prompt, ready to change it.
    expect(await focusState(page)).toEqual({ element: "textarea Prompt", visible: true });
    expect(await page.getByLabel("Prompt").inputValue()).toBe(prompt);
    const values = {
      Size: "1024x1536",
      Quality: "high",
      Images: "2",
      Background: "opaque",
      "Output format": "webp",
      "Compression (0 to 100)": "70",
      Moderation: "low",
      "Partial images": "2",
      "Images as": "b64_json",
    };
    for (const [label, value] of Object.entries(values)) {
      expect(await page.getByLabel(label, { exact: true }).inputValue(), label).toBe(value);
    }

    await page.getByRole("button", { name: "Generate" }).click();
    const again = await liveTaskId(page);
    expect(again).not.toBe(task.id);
    const made = await apiCall(service, "GET", `/v1/images/tasks/${again}?wait=60`);
    expect(made.json).toMatchObject({ prompt, parameters: PARAMETERS, status: "completed" });
    expect(problems).toEqual([]);
  });

  it("fills an edit's settings and asks for its images again", async () => {
    const { page, problems } = await openPage(browser);
    const png = encodePng({ width: 8, height: 8, channels: 3, pixels: new Uint8Array(192) });
    const form = new FormData();
    form.append("model", "gpt-image-1");
    form.append("prompt", "add a scarf");
    form.append("input_fidelity", "high");
    form.append("image", new Blob([png], { type: "image/png" }), "in.png");
    const response = await fetch(`${service.url}/v1/images/edits/tasks`, {
      method: "POST",
      headers: { Authorization: `Bearer ${DEMO_KEY}` },
      body: form,
    });
    const { id } = (await response.json()) as { id: string };
    await signIn(page, service.url);
    await openTask(page, service, id);
    await page.getByRole("button", { name: "Use these settings" }).click();
    await page.getByRole("heading", { name: "New image" }).waitFor();
    expect(await page.getByLabel("An edit of images").isChecked()).toBe(true);
    expect(await page.getByLabel("Prompt").inputValue()).toBe("add a scarf");
    expect(await page.getByLabel("Input fidelity").inputValue()).toBe("high");
    await page.getByText("Its input images are not kept: pick them again.").waitFor();
    // The focus waits on the images to pick.
    expect(await focusState(page)).toMatchObject({ element: "input Images (1 to 16)" });
    expect(await page.evaluate(`document.querySelector("input[name=image]").files.length`)).toBe(0);
    expect(problems).toEqual([]);
  });

  it("edits an image of a task: the image shown is the edit's input", async () => {
    const { page, problems } = await openPage(browser);
    const task = await makeTask(service, { prompt: "two boats", n: 2, response_format: "url" });
    const second = new Uint8Array(await (await fetch(task.data![1]!.url!)).arrayBuffer());
    await signIn(page, service.url);
    await openTask(page, service, task.id);
    await page.getByRole("button", { name: "Edit image 2" }).click();
    await page.getByRole("heading", { name: "New image" }).waitFor();
    expect(await page.getByLabel("An edit of images").isChecked()).toBe(true);
    expect(await focusState(page)).toEqual({ element: "textarea Prompt", visible: true });
    const picked = page.getByRole("list", { name: "Picked images" }).locator("img");
    await expect.poll(() => picked.count()).toBe(1);
    // The picked file is image 2, byte for byte.
    const bytes = (await page.evaluate(`(async () => {
      const file = document.querySelector("input[name=image]").files[0];
      return [file.name, [...new Uint8Array(await file.arrayBuffer())]];
    })()`)) as [string, number[]];
    expect(bytes[0]).toBe(`${task.id}-2.png`);
    expect(new Uint8Array(bytes[1])).toEqual(second);

    await page.getByLabel("Prompt").fill("paint the boat red");
    await page.getByRole("button", { name: "Edit images" }).click();
    const id = await liveTaskId(page);
    const edit = await apiCall(service, "GET", `/v1/images/tasks/${id}?wait=60`);
    expect(edit.json).toMatchObject({ kind: "edit", prompt: "paint the boat red" });
    await live(page).locator("img[data-kind=result]").waitFor({ timeout: 30_000 });
    expect(problems).toEqual([]);
  });

  it("copies the form as curl, which creates the task when run in a shell", async () => {
    const { page, problems } = await openPage(browser, { clipboard: true });
    await signIn(page, service.url);
    const prompt = `it's a "cat" $HOME`;
    await page.getByLabel("Prompt").fill(prompt);
    await page.getByLabel("Size", { exact: true }).fill("1536x1024");
    await page.getByLabel("Quality").selectOption("low");
    await page.getByText("Show the code").click();
    await page.getByRole("button", { name: "Copy as curl" }).click();
    await page.getByText("Copied the curl command.", { exact: false }).waitFor();
    const curl = await clipboardText(page);
    expect(curl).toContain(`${service.url}/v1/images/tasks`);
    expect(curl).not.toContain(DEMO_KEY);
    // The code is on the page too, to read or to copy by hand.
    expect(await page.getByLabel("The code").textContent()).toBe(curl);

    const dir = await snippetDir();
    const ran = await runCurl(curl, dir, DEMO_KEY);
    expect(ran.code, ran.stderr).toBe(0);
    const { id } = JSON.parse(ran.stdout) as { id: string };
    const made = await apiCall(service, "GET", `/v1/images/tasks/${id}?wait=60`);
    expect(made.json).toMatchObject({
      prompt,
      status: "completed",
      parameters: { size: "1536x1024", quality: "low", partial_images: 1, response_format: "url" },
    });

    // An edit: the picked file's name, read from the directory the command runs in.
    const png = encodePng({ width: 8, height: 8, channels: 3, pixels: new Uint8Array(192) });
    await writeFile(join(dir, "my cat.png"), png);
    await page.getByLabel("An edit of images").check();
    await page
      .getByLabel("Images (1 to 16)")
      .setInputFiles({ name: "my cat.png", mimeType: "image/png", buffer: png });
    await page.getByRole("button", { name: "Copy as curl" }).click();
    await expect.poll(() => clipboardText(page)).toContain("/v1/images/edits/tasks");
    const edited = await runCurl(await clipboardText(page), dir, DEMO_KEY);
    expect(edited.code, edited.stderr).toBe(0);
    const editId = (JSON.parse(edited.stdout) as { id: string }).id;
    const editTask = await apiCall(service, "GET", `/v1/images/tasks/${editId}?wait=60`);
    expect(editTask.json).toMatchObject({ kind: "edit", prompt, status: "completed" });
    expect(problems).toEqual([]);
  });

  it("copies the form as JavaScript, which node runs against the service, and as Python", async () => {
    const { page, problems } = await openPage(browser, { clipboard: true });
    await signIn(page, service.url);
    await page.getByLabel("Prompt").fill("a kite over the dunes");
    await page.getByLabel("Images", { exact: true }).fill("2");
    await page.getByText("Show the code").click();
    await page.getByRole("button", { name: "Copy as JavaScript" }).click();
    await page.getByText("Copied the JavaScript code.", { exact: false }).waitFor();
    const js = await clipboardText(page);
    expect(js).toContain('import OpenAI from "openai"');
    expect(js).toContain(`baseURL: "${service.url}/v1"`);
    expect(js).not.toContain(DEMO_KEY);

    const dir = await snippetDir();
    const ran = await runNode(js, dir, DEMO_KEY);
    expect(ran.code, ran.stderr).toBe(0);
    const [head, ...links] = ran.stdout.trim().split("\n");
    const [id, status] = head!.split(" ");
    expect(status).toBe("completed");
    expect(links).toHaveLength(2);
    expect((await fetch(links[0]!)).headers.get("content-type")).toBe("image/png");
    const made = await apiCall(service, "GET", `/v1/images/tasks/${id}`);
    expect(made.json).toMatchObject({ prompt: "a kite over the dunes", parameters: { n: 2 } });

    // A mistake in the form is named there, not written into code.
    await page.getByLabel("Prompt").fill("");
    await page.getByRole("button", { name: "Copy as Python" }).click();
    await page.getByText("Check the fields marked above first.").waitFor();
    await page.getByLabel("Prompt").fill("a kite at night");
    await page.getByRole("button", { name: "Copy as Python" }).click();
    await page.getByText("Copied the Python code.", { exact: false }).waitFor();
    const python = await clipboardText(page);
    expect(python).toContain(`client = OpenAI(base_url="${service.url}/v1")`);
    expect(python).toContain('client.post(\n    "/images/tasks",');
    expect(python).toContain("cast_to=object");
    await writeFile(join(dir, "image_task.py"), python);
    const parsed = await run(
      "python3",
      ["-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())", "image_task.py"],
      dir,
      DEMO_KEY,
    );
    expect(parsed.code, parsed.stderr).toBe(0);
    expect(await readFile(join(dir, "image_task.py"), "utf8")).not.toContain(DEMO_KEY);
    expect(problems).toEqual([]);
  });
});
