import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { POST_ROUTES, RESPONSE_ROUTES } from "../../src/proxy/passthrough-routes.js";
import { TASK_ROUTES } from "../../src/tasks/http/task-routes.js";
import { anchorsOf } from "../docs/markdown.js";
import { ROOT, ofKind, renderOnce } from "./kustomize.js";
import { ruleGroups, type AlertRule } from "./monitoring.js";

/*
 * Every alert of components/monitoring says what it is (summary, description) and links its
 * runbook: a section of docs/runbooks.md, under the alert's own name, that says what it means,
 * what to check and what to do. The links as rendered point at the annotation's base; the
 * passthrough alert reads exactly the passthrough routes.
 */

const RUNBOOKS = "docs/runbooks.md";
const runbooksText = () => readFileSync(join(ROOT, RUNBOOKS), "utf8");
const rules = (): AlertRule[] => ruleGroups().flatMap((group) => group.rules);

/** The `## ` sections of a markdown page: heading and body. */
function sectionsOf(text: string): Array<{ heading: string; body: string }> {
  return text
    .split(/^## /m)
    .slice(1)
    .map((part) => {
      const newline = part.indexOf("\n");
      return { heading: part.slice(0, newline).trim(), body: part.slice(newline + 1) };
    });
}

/** Why a rule's runbook link does not resolve to a heading of docs/runbooks.md, or undefined. */
function brokenRunbook(rule: AlertRule, anchors: Set<string>): string | undefined {
  const url = rule.annotations.runbook_url;
  if (!url) return "no runbook_url";
  const [page, anchor, ...more] = url.split("#");
  if (page !== RUNBOOKS || more.length > 0) return `not ${RUNBOOKS}#<anchor>: ${url}`;
  if (!anchors.has(anchor!)) return `no heading #${anchor} in ${RUNBOOKS}`;
  if (anchor !== rule.alert.toLowerCase()) return `#${anchor} is not the alert's own section`;
  return undefined;
}

describe("alert annotations and runbooks", () => {
  it("every alert has a severity, a summary, a description and a runbook_url to its heading of docs/runbooks.md", () => {
    const anchors = anchorsOf(runbooksText());
    const all = rules();
    expect(all.length).toBeGreaterThanOrEqual(9);
    for (const rule of all) {
      expect(["warning", "critical"], rule.alert).toContain(rule.labels.severity);
      expect(Object.keys(rule.annotations).sort(), rule.alert).toEqual([
        "description",
        "runbook_url",
        "summary",
      ]);
      expect(rule.annotations.summary!.length, rule.alert).toBeGreaterThan(10);
      expect(rule.annotations.description!.length, rule.alert).toBeGreaterThan(40);
      expect(brokenRunbook(rule, anchors), rule.alert).toBeUndefined();
    }
  });

  it("renders each runbook_url on the annotation's base, which names docs/runbooks.md", () => {
    const { ok, stderr, objects } = renderOnce("replicas", ["monitoring"]);
    expect(ok, stderr).toBe(true);
    type Rule = {
      metadata: { annotations: Record<string, string> };
      spec: { groups: Array<{ rules: AlertRule[] }> };
    };
    const [rule] = ofKind<Rule>(objects, "PrometheusRule");
    const base = rule!.metadata.annotations["image-task-sidecar/runbooks-url"]!;
    expect(base).toMatch(/^https:\/\/[^#]+\/docs\/runbooks\.md$/);
    const rendered = rule!.spec.groups.flatMap((group) => group.rules);
    expect(rendered.map((r) => r.alert)).toEqual(rules().map((r) => r.alert));
    for (const { alert, annotations } of rendered) {
      expect(annotations.runbook_url).toBe(`${base}#${alert.toLowerCase()}`);
    }
  });

  it("docs/runbooks.md has one section per alert, none for an alert that is gone, each saying what it means, what to check, what to do", () => {
    const sections = sectionsOf(runbooksText());
    const alerts = rules().map((rule) => rule.alert);
    expect(sections.map((section) => section.heading)).toEqual(["Looking at a replica", ...alerts]);
    for (const { heading, body } of sections.slice(1)) {
      for (const part of ["**What it means.**", "**What to check.**", "**What to do.**"]) {
        expect(body, `${heading}: ${part}`).toContain(part);
      }
    }
  });

  it("catches a link to no heading, another page or another alert's section (the check can fail)", () => {
    const anchors = anchorsOf("# Runbooks\n## ImageTaskSidecarA\n## ImageTaskSidecarB\n");
    const rule = (alert: string, runbook_url?: string): AlertRule => ({
      alert,
      expr: "vector(1)",
      labels: {},
      annotations: runbook_url ? { runbook_url } : {},
    });
    expect(brokenRunbook(rule("ImageTaskSidecarA", `${RUNBOOKS}#imagetasksidecara`), anchors)).toBe(
      undefined,
    );
    expect(brokenRunbook(rule("ImageTaskSidecarA"), anchors)).toBe("no runbook_url");
    expect(
      brokenRunbook(rule("ImageTaskSidecarC", `${RUNBOOKS}#imagetasksidecarc`), anchors),
    ).toMatch(/no heading/);
    expect(
      brokenRunbook(rule("ImageTaskSidecarA", `${RUNBOOKS}#imagetasksidecarb`), anchors),
    ).toMatch(/not the alert's own/);
    expect(
      brokenRunbook(rule("ImageTaskSidecarA", "docs/kubernetes.md#imagetasksidecara"), anchors),
    ).toMatch(/not docs\/runbooks\.md/);
  });
});

describe("the passthrough errors alert", () => {
  /** The route pattern the alert selects, as PromQL anchors it. */
  const routePattern = () => {
    const rule = rules().find((r) => r.alert === "ImageTaskSidecarPassthroughErrorsHigh")!;
    const patterns = new Set([...rule.expr.matchAll(/route=~"([^"]+)"/g)].map((m) => m[1]!));
    expect(patterns.size).toBe(1);
    return new RegExp(`^(?:${[...patterns][0]})$`);
  };

  it("reads every passthrough route and no other", () => {
    const pattern = routePattern();
    const passthrough = [...Object.values(POST_ROUTES), ...Object.values(RESPONSE_ROUTES)].map(
      (route) => route.template,
    );
    expect(passthrough.length).toBeGreaterThan(10);
    for (const template of passthrough) expect(template, template).toMatch(pattern);
    const others = [
      ...TASK_ROUTES.map((route) => route.template),
      "/v1/models",
      "/v1/models/*id",
      "/v1/images/files/:taskId/:file",
      "/healthz",
      "/readyz",
      "/metrics",
      "/console",
      "/mcp",
      "unmatched",
    ];
    for (const template of others) expect(template, template).not.toMatch(pattern);
  });
});
