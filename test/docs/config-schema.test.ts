import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Ajv } from "ajv";
import { parse as parseYaml } from "yaml";
import { afterAll, describe, expect, it } from "vitest";
import { configJsonSchema, type JsonSchema } from "../../src/config/config-json-schema.js";
import { loadConfig, parseConfig } from "../../src/config/load-config.js";
import { markdownBlocks } from "./markdown.js";

/*
 * config/schema.json and the reference tables in docs/configuration.md are
 * generated from the zod schema by `npm run schema` (scripts/config-schema.mjs).
 * These tests fail when either is stale, and check that every example config
 * passes both the zod schema (what start-up runs) and the JSON Schema (what
 * editors run).
 */

const ROOT = resolve(import.meta.dirname, "../..");
const REGENERATE = "stale: run `npm run schema` to regenerate config/schema.json and the reference";
const committed = JSON.parse(readFileSync(join(ROOT, "config/schema.json"), "utf8")) as JsonSchema;
const ajv = new Ajv({ allErrors: true, strict: true });
const validate = ajv.compile(committed);
/** The same, for a fragment of a file: the sections it shows, none required. */
const validateFragment = ajv.compile({ ...committed, required: [] });
const dirs: string[] = [];

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const errorsOf = (check: typeof validate) =>
  (check.errors ?? []).map((error) => `${error.instancePath || "(root)"} ${error.message}`);

/** A plausible value for every `${VAR}` without a default, by what its name says it holds. */
function envFor(text: string): Record<string, string> {
  const names = [...text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((match) => match[1]!);
  const valueOf = (name: string) =>
    name.includes("WEBHOOK")
      ? `whsec_${Buffer.alloc(32, 7).toString("base64")}`
      : name.includes("URL")
        ? "https://example.com/v1"
        : `${name.toLowerCase()}-${"x".repeat(40)}`;
  return Object.fromEntries(names.map((name) => [name, valueOf(name)]));
}

describe("config/schema.json", () => {
  it("is what the zod schema generates", () => {
    expect(committed, REGENERATE).toEqual(configJsonSchema());
  });

  it("and docs/configuration.md's reference are current (scripts/config-schema.mjs --check)", () => {
    // Runs the built generator (`npm test` builds dist/ first).
    const run = spawnSync(process.execPath, ["scripts/config-schema.mjs", "--check"], {
      cwd: ROOT,
      encoding: "utf8",
    });
    expect(run.status, run.stderr).toBe(0);
  });

  it("the reference's tables have four cells a row: field, type, default, description", () => {
    const page = readFileSync(join(ROOT, "docs/configuration.md"), "utf8");
    const generated = page.slice(page.indexOf("<!-- BEGIN GENERATED"), page.indexOf("<!-- END"));
    const rows = generated.split("\n").filter((line) => line.startsWith("| `"));
    expect(rows.length).toBeGreaterThan(60);
    for (const row of rows) expect(row.split(/(?<!\\)\|/).length, row).toBe(6);
  });

  it("the check fails on a stale copy, naming each file and the command", () => {
    const dir = mkdtempSync(join(tmpdir(), "sidecar-schema-"));
    dirs.push(dir);
    cpSync(join(ROOT, "config"), join(dir, "config"), { recursive: true });
    cpSync(join(ROOT, "docs"), join(dir, "docs"), { recursive: true });
    const reference = join(dir, "docs/configuration.md");
    writeFileSync(reference, readFileSync(reference, "utf8").replace("`server.port`", "`port`"));
    writeFileSync(join(dir, "config/schema.json"), "{}\n");
    const run = spawnSync(
      process.execPath,
      ["scripts/config-schema.mjs", "--check", "--root", dir],
      { cwd: ROOT, encoding: "utf8" },
    );
    expect(run.status).toBe(1);
    expect(run.stderr).toContain("config/schema.json is stale: run `npm run schema`");
    expect(run.stderr).toContain("docs/configuration.md is stale: run `npm run schema`");
  });

  it("carries every field's description and default, numbers and booleans also as ${VAR}", () => {
    const server = (committed.properties as Record<string, JsonSchema>).server!;
    const port = (server.properties as Record<string, JsonSchema>).port!;
    expect(port.default).toBe(8080);
    expect(port.description).toMatch(/PORT/);
    const fields = (section: JsonSchema) => Object.entries(section.properties ?? {});
    for (const [name, section] of fields(committed)) {
      expect(section.description, name).toBeTruthy();
      for (const [field, schema] of fields(section as JsonSchema)) {
        expect((schema as JsonSchema).description, `${name}.${field}`).toBeTruthy();
      }
    }
    const accepts = (server: Record<string, unknown>) =>
      validateFragment({ server }) ? [] : errorsOf(validateFragment);
    expect(accepts({ port: "${PORT}", trustProxy: "${TRUST:-false}" })).toEqual([]);
    expect(accepts({ port: "eighty" })).not.toEqual([]);
    expect(accepts({ port: 70000 })).not.toEqual([]);
    expect(accepts({ prot: 8080 })).not.toEqual([]);
  });
});

describe("example configs", () => {
  const files = readdirSync(join(ROOT, "config")).filter((file) => file.endsWith(".yaml"));

  it.each(files)("config/%s names the schema for editors and passes both schemas", (file) => {
    const text = readFileSync(join(ROOT, "config", file), "utf8");
    expect(text.split("\n")[0]).toBe("# yaml-language-server: $schema=./schema.json");
    expect(validate(parseYaml(text)), errorsOf(validate).join("\n")).toBe(true);
    expect(() => loadConfig({ file: join(ROOT, "config", file), env: envFor(text) })).not.toThrow();
  });

  it.each(["single", "replicas"])(
    "deploy/kubernetes/overlays/%s/config.yaml (its ConfigMap) passes the JSON Schema",
    (dir) => {
      const overlay = join(ROOT, "deploy/kubernetes/overlays", dir);
      const text = readFileSync(join(overlay, "config.yaml"), "utf8");
      expect(validate(parseYaml(text)), errorsOf(validate).join("\n")).toBe(true);
      // The variables as the Secret example gives them (URLs where URLs go).
      const secret = readFileSync(join(overlay, "secret.example.env"), "utf8")
        .split("\n")
        .filter((line) => line.includes("=") && !line.startsWith("#"))
        .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]);
      const env: Record<string, string> = { ...envFor(text), ...Object.fromEntries(secret) };
      // As written, its placeholders are refused (see test/config/placeholder-secrets.test.ts).
      expect(() => parseConfig(parseYaml(text), env)).toThrow(/placeholder \(change-me\)/);
      const filled = Object.fromEntries(
        Object.entries(env).map(([name, value]) => [
          name,
          value.replaceAll("change-me", "k3pT-9vQx"),
        ]),
      );
      expect(() => parseConfig(parseYaml(text), filled)).not.toThrow();
    },
  );

  it("every YAML config fragment in the docs passes the JSON Schema", () => {
    const sections = new Set(Object.keys(committed.properties as object));
    let checked = 0;
    for (const block of markdownBlocks(ROOT)) {
      if (block.lang !== "yaml") continue;
      const value = parseYaml(block.code) as unknown;
      if (!value || typeof value !== "object" || Array.isArray(value)) continue;
      // A Kubernetes manifest, a bucket rule, Prometheus's config: not ours.
      if (!Object.keys(value).every((key) => sections.has(key))) continue;
      checked += 1;
      // A whole file (it names its channels and groups): start-up's own check too.
      if ("channels" in value && "groups" in value) {
        expect(() => parseConfig(value, envFor(block.code)), block.where).not.toThrow();
      }
      expect(
        validateFragment(value),
        `${block.where}\n${errorsOf(validateFragment).join("\n")}`,
      ).toBe(true);
    }
    expect(checked).toBeGreaterThan(5);
  });
});
