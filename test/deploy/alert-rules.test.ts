import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { afterAll, describe, expect, it } from "vitest";
import { UNIT_TESTS } from "./alert-rule-cases.js";
import { ruleGroups } from "./monitoring.js";

/*
 * components/monitoring's alert rules, as Prometheus reads them: `promtool
 * check rules` on the rules, and `promtool test rules` on made-up series for
 * each alert (alert-rule-cases.ts). Their annotations and runbooks:
 * runbooks.test.ts.
 */

const dir = mkdtempSync(join(tmpdir(), "promtool-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function promtool(args: string[], files: Record<string, unknown>) {
  for (const [name, content] of Object.entries(files)) {
    writeFileSync(join(dir, name), typeof content === "string" ? content : stringify(content));
  }
  const run = spawnSync("promtool", args, { cwd: dir, encoding: "utf8" });
  if (run.error) throw run.error;
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

/** The rules without their annotations, whose rendered text the unit tests would have to repeat. */
const bareRules = () => ({
  groups: ruleGroups().map((group) => ({
    ...group,
    rules: group.rules.map(({ annotations: _annotations, ...rule }) => rule),
  })),
});

/** Every alert, in the file's order. */
const ALERTS = [
  "ImageTaskSidecarQueueBacklogGrowing",
  "ImageTaskSidecarTaskFailureRatioHigh",
  "ImageTaskSidecarStoreUnavailable",
  "ImageTaskSidecarPassthroughLatencyHigh",
  "ImageTaskSidecarChannelDown",
  "ImageTaskSidecarPassthroughErrorsHigh",
  "ImageTaskSidecarWebhooksGivenUp",
  "ImageTaskSidecarImagesMissing",
  "ImageTaskSidecarEventLoopLagHigh",
  "ImageTaskSidecarTargetDown",
  "ImageTaskSidecarTargetMissing",
];

describe("components/monitoring alert rules", () => {
  it("pass promtool check rules: backlog, failures, stores, latency, channels, 5xx, webhooks, images missing, event loop, targets", () => {
    const groups = ruleGroups();
    const names = groups.flatMap((group) => group.rules.map((rule) => rule.alert));
    expect(names).toEqual(ALERTS);
    const check = promtool(["check", "rules", "rules.yaml"], { "rules.yaml": { groups } });
    expect(check.status, check.output).toBe(0);
    expect(check.output).toContain(`SUCCESS: ${ALERTS.length} rules found`);
  });

  it("fire on made-up series when they should, and only then (promtool test rules)", () => {
    // Every alert but the latency one (a histogram, read the same way as the checked ones) is
    // tested, each firing at least once.
    const firing = new Set(
      UNIT_TESTS.tests.flatMap((test) =>
        test.alert_rule_test.filter((t) => t.exp_alerts.length > 0).map((t) => t.alertname),
      ),
    );
    expect([...firing].sort()).toEqual(
      ALERTS.filter((name) => name !== "ImageTaskSidecarPassthroughLatencyHigh").sort(),
    );
    const run = promtool(["test", "rules", "tests.yaml"], {
      "rules.yaml": bareRules(),
      "tests.yaml": UNIT_TESTS,
    });
    expect(run.status, run.output).toBe(0);
    expect(run.output).toContain("SUCCESS");
  });

  it("are checked for real (promtool refuses a broken rule and a wrong expectation)", () => {
    const groups = ruleGroups();
    groups[0]!.rules[0]!.expr = "max by (namespace (image_task_sidecar_task_queue_depth)";
    const check = promtool(["check", "rules", "broken.yaml"], { "broken.yaml": { groups } });
    expect(check.status).not.toBe(0);
    // Expecting the flat queue to alert too must fail.
    const wrong = structuredClone(UNIT_TESTS);
    wrong.tests[0]!.alert_rule_test[2]!.exp_alerts.push({
      exp_labels: { severity: "warning", namespace: "flat", job: "image-task-sidecar" },
    });
    const run = promtool(["test", "rules", "wrong.yaml"], {
      "rules.yaml": bareRules(),
      "wrong.yaml": wrong,
    });
    expect(run.status, run.output).not.toBe(0);
    expect(run.output).toContain("FAILED");
    // So must expecting task routes' 503s to count as passthrough errors.
    const tasks = structuredClone(UNIT_TESTS);
    const errors = tasks.tests.find((test) =>
      test.alert_rule_test.some((t) => t.alertname === "ImageTaskSidecarPassthroughErrorsHigh"),
    )!;
    errors.alert_rule_test[0]!.exp_alerts.push({
      exp_labels: { severity: "critical", namespace: "tasks", job: "image-task-sidecar" },
    });
    const again = promtool(["test", "rules", "tasks.yaml"], {
      "rules.yaml": bareRules(),
      "tasks.yaml": tasks,
    });
    expect(again.status, again.output).not.toBe(0);
  });
});
