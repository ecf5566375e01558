/**
 * The form as code a person can paste: curl, or the official `openai` SDK
 * for Python or JavaScript (its generic `post` and `get`, since the task
 * routes are this service's own). The key is read from `OPENAI_API_KEY`,
 * never written into the code.
 */

/** A file the code reads from the current directory: the picked file's name and type. */
export interface SnippetFile {
  name: string;
  type: string;
}

/** What the code submits: a generation's JSON body, or an edit's fields and files. */
export interface SnippetRequest {
  kind: "generate" | "edit";
  /** The task's fields as the form sends them (numbers as numbers). */
  body: Readonly<Record<string, string | number>>;
  /** Edits: the images (1 or more) and the optional mask. */
  images?: readonly SnippetFile[];
  mask?: SnippetFile;
}

const ROUTES = { generate: "/images/tasks", edit: "/images/edits/tasks" } as const;

/** One shell word: single-quoted, a `'` inside as `'\''`. */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** A file for curl's `-F name=@file`: quoted when it holds `"`, `;`, `,` or a blank. */
function curlFile(name: string): string {
  return /^[\w.+-]+$/.test(name) ? name : `"${name.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/**
 * A curl command that submits the task. `apiBase`: the API's base URL, e.g.
 * `https://host/v1` (no trailing slash).
 */
export function curlSnippet(request: SnippetRequest, apiBase: string): string {
  const lines = [
    `curl -sS ${shellQuote(apiBase + ROUTES[request.kind])}`,
    `-H "Authorization: Bearer $OPENAI_API_KEY"`,
  ];
  if (request.kind === "generate") {
    lines.push(`-H 'Content-Type: application/json'`);
    lines.push(`-d ${shellQuote(JSON.stringify(request.body, null, 2))}`);
  } else {
    // --form-string: a value starting with @ or < is text, not a file to read.
    for (const [name, value] of Object.entries(request.body)) {
      lines.push(`--form-string ${shellQuote(`${name}=${value}`)}`);
    }
    const images = request.images ?? [];
    const field = images.length > 1 ? "image[]" : "image";
    for (const image of images) lines.push(`-F ${shellQuote(`${field}=@${curlFile(image.name)}`)}`);
    if (request.mask) lines.push(`-F ${shellQuote(`mask=@${curlFile(request.mask.name)}`)}`);
  }
  return `${lines.join(" \\\n  ")}\n`;
}

/** The file name a `b64_json` result is saved under, by the output format asked. */
function savedExtension(request: SnippetRequest): string {
  const format = request.body.output_format;
  return format === "jpeg" ? "jpg" : typeof format === "string" ? format : "png";
}

/** A value of the body as code: JSON's strings and numbers read the same in Python and JS. */
const literal = (value: string | number): string => JSON.stringify(value);

/** A JS object key: bare where it can be. */
const jsKey = (name: string): string => (/^[A-Za-z_$][\w$]*$/.test(name) ? name : literal(name));

/** The body's entries as code lines, each of the edit's files as the object `file` writes. */
function bodyEntries(
  request: SnippetRequest,
  key: (name: string) => string,
  file: (image: SnippetFile) => string,
): string[] {
  const entries = Object.entries(request.body).map(
    ([name, value]) => `${key(name)}: ${literal(value)}`,
  );
  if (request.kind === "edit") {
    const images = (request.images ?? []).map(file);
    entries.push(`${key("images")}: [${images.join(", ")}]`);
    if (request.mask) entries.push(`${key("mask")}: ${file(request.mask)}`);
  }
  return entries;
}

/** Python with the `openai` package: submit, wait for the task, print links or save files. */
export function pythonSnippet(request: SnippetRequest, apiBase: string): string {
  const edit = request.kind === "edit";
  const entries = bodyEntries(
    request,
    literal,
    (image) => `{"image_url": data_url(${literal(image.name)}, ${literal(image.type)})}`,
  );
  return [
    "# pip install openai; OPENAI_API_KEY=... python image_task.py",
    "import base64",
    "",
    "from openai import OpenAI",
    "",
    `client = OpenAI(base_url=${literal(apiBase)})  # the key: OPENAI_API_KEY`,
    ...(edit
      ? [
          "",
          "",
          "def data_url(path, mime):",
          '    with open(path, "rb") as file:',
          '        return f"data:{mime};base64,{base64.b64encode(file.read()).decode()}"',
          "",
        ]
      : []),
    "",
    "task = client.post(",
    `    ${literal(ROUTES[request.kind])},`,
    "    body={",
    ...entries.map((entry) => `        ${entry},`),
    "    },",
    "    cast_to=object,",
    ")",
    'while task["status"] in ("queued", "in_progress"):',
    "    task = client.get(",
    `        f"/images/tasks/{task['id']}", cast_to=object, options={"params": {"wait": 30}}`,
    "    )",
    `print(task["id"], task["status"])`,
    'if task["status"] == "failed":',
    `    raise SystemExit(f"{task['error']['code']}: {task['error']['message']}")`,
    'for index, image in enumerate(task["data"], 1):',
    '    if image.get("url"):',
    '        print(image["url"])',
    "    else:",
    `        name = f"{task['id']}-{index}.${savedExtension(request)}"`,
    '        with open(name, "wb") as file:',
    '            file.write(base64.b64decode(image["b64_json"]))',
    "        print(name)",
    "",
  ].join("\n");
}

/** JavaScript (an ES module for Node) with the `openai` package: the same steps. */
export function javascriptSnippet(request: SnippetRequest, apiBase: string): string {
  const edit = request.kind === "edit";
  const entries = bodyEntries(
    request,
    jsKey,
    (image) => `{ image_url: dataUrl(${literal(image.name)}, ${literal(image.type)}) }`,
  );
  return [
    "// npm install openai; OPENAI_API_KEY=... node image-task.mjs",
    `import { ${edit ? "readFileSync, " : ""}writeFileSync } from "node:fs";`,
    'import OpenAI from "openai";',
    "",
    `const client = new OpenAI({ baseURL: ${literal(apiBase)} }); // the key: OPENAI_API_KEY`,
    ...(edit
      ? [
          "const dataUrl = (path, type) =>",
          '  `data:${type};base64,${readFileSync(path).toString("base64")}`;',
        ]
      : []),
    "",
    `let task = await client.post(${literal(ROUTES[request.kind])}, {`,
    "  body: {",
    ...entries.map((entry) => `    ${entry},`),
    "  },",
    "});",
    'while (task.status === "queued" || task.status === "in_progress") {',
    "  task = await client.get(`/images/tasks/${task.id}`, { query: { wait: 30 } });",
    "}",
    "console.log(task.id, task.status);",
    'if (task.status === "failed") throw new Error(`${task.error.code}: ${task.error.message}`);',
    "for (const [index, image] of task.data.entries()) {",
    "  if (image.url) {",
    "    console.log(image.url);",
    "  } else {",
    `    const name = \`\${task.id}-\${index + 1}.${savedExtension(request)}\`;`,
    '    writeFileSync(name, Buffer.from(image.b64_json, "base64"));',
    "    console.log(name);",
    "  }",
    "}",
    "",
  ].join("\n");
}
