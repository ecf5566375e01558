import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pino } from "pino";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { expect, onTestFinished } from "vitest";
import { parse as parseYaml } from "yaml";
import { DEFAULT_CONFIG_FILE, loadConfig, parseConfig } from "../../src/config/load-config.js";
import { startServer, type RunningServer } from "../../src/server.js";
import { slow } from "../support/time-factor.js";

/** Debian's Chromium, which scripts/ensure-test-tools.sh installs when it is missing. */
export const CHROMIUM = "/usr/bin/chromium";

/** Flags for a headless Chromium in a container: no sandbox, GPU or calls home. */
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** The demo key of config/default.yaml. */
export const DEMO_KEY = "sk-demo-image-task-sidecar";

/**
 * The service as `npm start` runs it (config/default.yaml: the demo channel,
 * the demo key), in memory, on a free port, with the demo's image delay set;
 * `images`: another `images:` section (an S3 bucket, say).
 */
export async function startDemoService(
  imageDelayMs: number,
  images?: Record<string, unknown>,
): Promise<RunningServer> {
  const env = { PORT: "0", STORE_URL: "memory://" };
  let { config } = loadConfig({ env });
  if (images) {
    const raw = parseYaml(readFileSync(DEFAULT_CONFIG_FILE, "utf8")) as Record<string, unknown>;
    config = parseConfig({ ...raw, images }, env);
  }
  config.channels = config.channels.map((channel) => ({ ...channel, imageDelayMs }));
  return startServer({ config, logger: pino({ level: "silent" }), defaultMetrics: false });
}

/**
 * A fresh Chromium: Playwright gives each launch a new temporary profile
 * (`--user-data-dir`), deleted when it closes. Closed after the tests.
 */
export async function launchChromium(): Promise<Browser> {
  expect(existsSync(CHROMIUM), `${CHROMIUM} (Debian: apt-get install chromium)`).toBe(true);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
}

/** What a page did that no page of the console may do. */
export interface PageWatch {
  page: Page;
  /** Console messages of type error, page errors, CSP violations, dialogs. */
  problems: string[];
  dialogs: string[];
}

/**
 * A page in its own browser context (its own `sessionStorage`), recording
 * console errors, uncaught errors, dialogs (`alert`) and CSP violations
 * (the `securitypolicyviolation` event, listened for before any script runs).
 */
export async function openPage(
  browser: Browser,
  options: {
    width?: number;
    height?: number;
    colorScheme?: "light" | "dark";
    /** Lets the page write and the test read the clipboard (copy buttons). */
    clipboard?: boolean;
  } = {},
): Promise<PageWatch> {
  const context: BrowserContext = await browser.newContext({
    viewport: { width: options.width ?? 1000, height: options.height ?? 800 },
    colorScheme: options.colorScheme ?? "light",
    locale: "en-US",
    timezoneId: "UTC",
    acceptDownloads: true,
    ...(options.clipboard ? { permissions: ["clipboard-read", "clipboard-write"] } : {}),
  });
  onTestFinished(() => context.close());
  // Playwright's own waits (a locator, a download, a navigation) take 30 s unless told: stretched
  // on a loaded machine as every other deadline of the tests is (a ZIP of presigned S3 images
  // took longer than 30 s to download under a loaded `npm run check` here).
  context.setDefaultTimeout(slow(30_000));
  const page = await context.newPage();
  const problems: string[] = [];
  const dialogs: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console: ${message.text()}`);
  });
  page.on("pageerror", (err) => problems.push(`pageerror: ${err.message}`));
  page.on("dialog", (dialog) => {
    dialogs.push(`${dialog.type()}: ${dialog.message()}`);
    void dialog.dismiss();
  });
  await page.exposeFunction("__reportViolation", (text: string) => problems.push(`csp: ${text}`));
  // Before any script of the page runs (as a string: it runs in the page, not in Node).
  await page.addInitScript({
    content: `document.addEventListener("securitypolicyviolation", (event) =>
      window.__reportViolation(event.violatedDirective + " " + event.blockedURI));`,
  });
  return { page, problems, dialogs };
}

/** Signs in on the console at `url` with `key`, as a user does: paste, press Enter. */
export async function signIn(page: Page, url: string, key = DEMO_KEY): Promise<void> {
  await page.goto(`${url}/console/`);
  await page.getByLabel("API key").fill(key);
  await page.getByLabel("API key").press("Enter");
  await expect
    .poll(() => page.getByRole("button", { name: "Sign out" }).count(), { timeout: 30_000 })
    .toBe(1);
}

/** Interactive roles: each must have an accessible name. */
const CONTROL_ROLES = new Set([
  "button",
  "link",
  "textbox",
  "combobox",
  "checkbox",
  "radio",
  "spinbutton",
  "slider",
  "searchbox",
  "listbox",
  "switch",
  "tab",
  "menuitem",
  "DisclosureTriangle",
]);

/**
 * The page's controls as the browser's accessibility tree has them (what a
 * screen reader announces): `role "name"` each, and those without a name.
 */
export async function accessibleControls(
  page: Page,
): Promise<{ named: string[]; unnamed: string[] }> {
  const cdp = await page.context().newCDPSession(page);
  try {
    const { nodes } = (await cdp.send("Accessibility.getFullAXTree")) as {
      nodes: Array<{ ignored: boolean; role?: { value?: string }; name?: { value?: string } }>;
    };
    const named: string[] = [];
    const unnamed: string[] = [];
    for (const node of nodes) {
      const role = String(node.role?.value ?? "");
      if (node.ignored || !CONTROL_ROLES.has(role)) continue;
      const name = String(node.name?.value ?? "").trim();
      (name ? named : unnamed).push(name ? `${role} "${name}"` : role);
    }
    return { named, unnamed };
  } finally {
    await cdp.detach();
  }
}

/** Form fields (`input`, `select`, `textarea`) that no `<label>` names. */
export function unlabelledFields(page: Page): Promise<string[]> {
  return page.evaluate(`[...document.querySelectorAll("input, select, textarea")]
    .filter((el) => el.type !== "hidden" && el.labels.length === 0)
    .map((el) => el.outerHTML.slice(0, 80))`);
}

/** Whether the focused element shows a focus ring (an outline at least 2 px wide). */
export async function focusState(page: Page): Promise<{ element: string; visible: boolean }> {
  return page.evaluate(`(() => {
    const el = document.activeElement;
    if (!el || el === document.body) return { element: "body", visible: false };
    const style = getComputedStyle(el);
    const visible = style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2;
    const name = el.getAttribute("aria-label") || el.textContent.trim().slice(0, 30) ||
      (el.labels && el.labels[0] ? el.labels[0].textContent.trim() : "") || el.name || "";
    return { element: el.tagName.toLowerCase() + (name ? " " + name : ""), visible };
  })()`);
}

/** Whether anything sticks out sideways (the page would scroll horizontally). */
export function overflowsSideways(page: Page): Promise<boolean> {
  return page.evaluate("document.documentElement.scrollWidth > window.innerWidth");
}

/** The clipboard's text, as a paste would give it (the page needs `clipboard: true`). */
export function clipboardText(page: Page): Promise<string> {
  return page.evaluate("navigator.clipboard.readText()");
}

/** A task as the API answers it, in what these tests look at. */
export interface ApiTask {
  id: string;
  status: string;
  kind?: string;
  prompt?: string;
  parameters?: Record<string, unknown>;
  data?: Array<{ url?: string; b64_json?: string }>;
  usage?: { input_tokens?: number; output_tokens?: number; total_tokens?: number };
  error?: { code: string; message: string };
}

/** A call of the API as a script makes it, with the demo key: its status and JSON. */
export async function apiCall(
  server: RunningServer,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: ApiTask & { error?: { code: string } } }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${DEMO_KEY}`, "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, json: (await response.json()) as ApiTask };
}

/** Submits a task (gpt-image-1 unless told) and, with `wait`, waits for it to finish. */
export async function makeTask(
  server: RunningServer,
  body: Record<string, unknown>,
  wait = true,
): Promise<ApiTask> {
  const made = await apiCall(server, "POST", "/v1/images/tasks", { model: "gpt-image-1", ...body });
  expect(made.status, JSON.stringify(made.json)).toBe(202);
  if (!wait) return made.json;
  const done = await apiCall(server, "GET", `/v1/images/tasks/${made.json.id}?wait=60`);
  expect(done.json.status).toBe("completed");
  return done.json;
}

/** axe-core's script, read once (it runs in the page through the DevTools protocol, which the CSP does not govern). */
let axeSource: string | undefined;

/**
 * What axe-core (WCAG 2.x A and AA rules) finds wrong on the page as it is
 * now: `rule: selector, ...` per rule, empty when the page is clean.
 */
export async function axeViolations(page: Page): Promise<string[]> {
  axeSource ??= readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
  await page.evaluate(axeSource);
  const violations = (await page.evaluate(`axe.run(document, {
    runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] },
    resultTypes: ["violations"],
  }).then((result) => result.violations.map((v) => ({
    id: v.id,
    targets: v.nodes.map((node) => node.target.join(" ")),
  })))`)) as Array<{ id: string; targets: string[] }>;
  return violations.map(({ id, targets }) => `${id}: ${targets.join(", ")}`);
}
