import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  curlSnippet,
  javascriptSnippet,
  pythonSnippet,
  shellQuote,
  type SnippetRequest,
} from "../../console/src/code-snippets.js";
import { encodePng } from "../../src/demo/png-encoder.js";
import type { RunningServer } from "../../src/server.js";
import { DEMO_KEY, startDemoService } from "./console-browser.js";
import { run, runCurl, runNode, snippetDir } from "./run-snippet.js";

/** Everything a shell, Python or JavaScript could read as something else. */
const PROMPT = `It's a "fox" \\ $HOME \`id\` $(id) 🦊 ünïcode\nsecond line'; echo pwned #`;

const generate: SnippetRequest = {
  kind: "generate",
  body: { model: "gpt-image-1", prompt: PROMPT, size: "1024x1024", n: 2, response_format: "url" },
};

const png = encodePng({ width: 8, height: 8, channels: 3, pixels: new Uint8Array(192).fill(90) });

/** An edit of two picked files (one with a name curl must quote) and a mask. */
const edit: SnippetRequest = {
  kind: "edit",
  body: { model: "gpt-image-1", prompt: "@not-a-file add a hat", response_format: "url" },
  images: [
    { name: "cat.png", type: "image/png" },
    { name: 'my "best"; cat.png', type: "image/png" },
  ],
  mask: { name: "mask.png", type: "image/png" },
};

async function withFiles(dir: string): Promise<void> {
  for (const name of ["cat.png", 'my "best"; cat.png', "mask.png"]) {
    await writeFile(join(dir, name), png);
  }
}

/** A stand-in `openai` package for Python (the real one is not installed here): it prints each call. */
const PYTHON_STUB = `import json, os
class OpenAI:
    def __init__(self, *, base_url=None):
        self.base_url = base_url
    def post(self, path, *, cast_to, body=None, options={}):
        assert cast_to is object
        print(json.dumps({"post": path, "base_url": self.base_url, "body": body,
                          "key": os.environ["OPENAI_API_KEY"]}))
        return {"id": "task_x", "status": "queued"}
    def get(self, path, *, cast_to, options={}):
        assert cast_to is object
        print(json.dumps({"get": path, "params": options.get("params")}))
        return {"id": "task_x", "status": "completed",
                "data": [{"url": "https://h/0.png"}, {"b64_json": "aGk="}]}
`;

describe("the console's code snippets", () => {
  let service: RunningServer;
  beforeAll(async () => {
    service = await startDemoService(10);
  });
  afterAll(() => service?.close(200));

  const api = async (path: string) => {
    const response = await fetch(`${service.url}/v1${path}`, {
      headers: { Authorization: `Bearer ${DEMO_KEY}` },
    });
    return (await response.json()) as Record<string, unknown>;
  };

  it("quote any text as one shell word", async () => {
    const dir = await snippetDir();
    const echoed = await run("bash", ["-c", `printf %s ${shellQuote(PROMPT)}`], dir, "");
    expect(echoed.stdout).toBe(PROMPT);
  });

  it("never hold the key: it is read from OPENAI_API_KEY", () => {
    for (const write of [curlSnippet, pythonSnippet, javascriptSnippet]) {
      for (const request of [generate, edit]) {
        const code = write(request, "http://127.0.0.1:1/v1");
        expect(code).toContain("OPENAI_API_KEY");
        expect(code).not.toContain(DEMO_KEY);
      }
    }
  });

  it("as curl, submit the task exactly as the form has it, a generation and an edit", async () => {
    const dir = await snippetDir();
    await withFiles(dir);
    const base = `${service.url}/v1`;
    const made = await runCurl(curlSnippet(generate, base), dir, DEMO_KEY);
    expect(made.code, made.stderr).toBe(0);
    const task = JSON.parse(made.stdout) as { id: string; status: string };
    expect(task.status).toBe("queued");
    expect(await api(`/images/tasks/${task.id}?wait=30`)).toMatchObject({
      prompt: PROMPT,
      status: "completed",
      parameters: { size: "1024x1024", n: 2, response_format: "url" },
    });

    const edited = await runCurl(curlSnippet(edit, base), dir, DEMO_KEY);
    expect(edited.code, edited.stderr).toBe(0);
    const editTask = JSON.parse(edited.stdout) as { id: string };
    expect(await api(`/images/tasks/${editTask.id}?wait=30`)).toMatchObject({
      kind: "edit",
      prompt: "@not-a-file add a hat",
      status: "completed",
    });
  });

  it("as JavaScript with the openai SDK, submit, wait and print the links", async () => {
    const dir = await snippetDir();
    await withFiles(dir);
    const base = `${service.url}/v1`;
    const made = await runNode(javascriptSnippet(generate, base), dir, DEMO_KEY);
    expect(made.code, made.stderr).toBe(0);
    const [first, ...links] = made.stdout.trim().split("\n");
    const [id, status] = first!.split(" ");
    expect(status).toBe("completed");
    expect(links).toHaveLength(2);
    expect(links[0]).toMatch(/^http:\/\/127\.0\.0\.1:\d+\//);
    expect(await api(`/images/tasks/${id}`)).toMatchObject({ prompt: PROMPT });

    // An edit as JSON, its files read as data: URLs; a b64_json result saved to files.
    const b64Edit = { ...edit, body: { ...edit.body, response_format: "b64_json" } };
    const edited = await runNode(javascriptSnippet(b64Edit, base), dir, DEMO_KEY);
    expect(edited.code, edited.stderr).toBe(0);
    const [editLine, saved] = edited.stdout.trim().split("\n");
    expect(editLine).toMatch(/^task_\S+ completed$/);
    expect(saved).toMatch(/^task_\S+-1\.png$/);
    const bytes = await readFile(join(dir, saved!));
    expect(bytes.subarray(1, 4).toString()).toBe("PNG");
    expect(await api(`/images/tasks/${editLine!.split(" ")[0]}`)).toMatchObject({ kind: "edit" });
  });

  it("as Python, call the SDK's post and get with the body as written", async () => {
    const dir = await snippetDir();
    await withFiles(dir);
    await writeFile(join(dir, "openai.py"), PYTHON_STUB);
    await writeFile(join(dir, "task.py"), pythonSnippet(generate, "http://svc.example/v1"));
    const ran = await run("python3", ["task.py"], dir, "sk-from-env");
    expect(ran.code, ran.stderr).toBe(0);
    const lines = ran.stdout.trim().split("\n");
    expect(JSON.parse(lines[0]!)).toEqual({
      post: "/images/tasks",
      base_url: "http://svc.example/v1",
      body: generate.body,
      key: "sk-from-env",
    });
    expect(JSON.parse(lines[1]!)).toEqual({ get: "/images/tasks/task_x", params: { wait: 30 } });
    expect(lines.slice(2)).toEqual(["task_x completed", "https://h/0.png", "task_x-2.png"]);
    expect((await readFile(join(dir, "task_x-2.png"))).toString()).toBe("hi");

    await writeFile(join(dir, "edit.py"), pythonSnippet(edit, "http://svc.example/v1"));
    const edited = await run("python3", ["edit.py"], dir, "sk-from-env");
    expect(edited.code, edited.stderr).toBe(0);
    const { post, body } = JSON.parse(edited.stdout.split("\n")[0]!) as {
      post: string;
      body: { images: Array<{ image_url: string }>; mask: { image_url: string } };
    };
    expect(post).toBe("/images/edits/tasks");
    const dataUrl = `data:image/png;base64,${Buffer.from(png).toString("base64")}`;
    expect(body).toEqual({
      ...edit.body,
      images: [{ image_url: dataUrl }, { image_url: dataUrl }],
      mask: { image_url: dataUrl },
    });
  });
});
