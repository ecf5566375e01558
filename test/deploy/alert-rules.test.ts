import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { afterAll, describe, expect, it } from "vitest";
import { anchorsOf } from "../docs/markdown.js";
import { ROOT } from "./kustomize.js";
import { ruleGroups } from "./monitoring.js";

/*
 * components/monitoring's alert rules, as Prometheus reads them: `promtool
 * check rules` on the rules, and `promtool test rules` on made-up series for
 * the backlog, failure ratio and store alerts. Each alert's runbook is a
 * section of docs/kubernetes.md.
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

const JOB = 'job="image-task-sidecar"';

/** A promtool unit test file (`promtool test rules`). */
interface RuleTests {
  rule_files: string[];
  evaluation_interval: string;
  tests: Array<{
    interval: string;
    input_series: Array<{ series: string; values: string }>;
    alert_rule_test: Array<{
      eval_time: string;
      alertname: string;
      exp_alerts: Array<{ exp_labels: Record<string, string> }>;
    }>;
  }>;
}

/** Made-up series and what each alert must (not) do with them; one promtool test group. */
const UNIT_TESTS: RuleTests = {
  rule_files: ["rules.yaml"],
  evaluation_interval: "1m",
  tests: [
    {
      interval: "1m",
      input_series: [
        // Two replicas report the same growing queue (2 more a minute); another stays flat.
        ...["a", "b"].map((pod) => ({
          series: `image_task_sidecar_task_queue_depth{namespace="growing",${JOB},pod="${pod}"}`,
          values: "0+2x60",
        })),
        {
          series: `image_task_sidecar_task_queue_depth{namespace="flat",${JOB},pod="a"}`,
          values: "50x60",
        },
      ],
      alert_rule_test: [
        // 20 waiting: not yet above the threshold.
        { eval_time: "10m", alertname: "ImageTaskSidecarQueueBacklogGrowing", exp_alerts: [] },
        // Pending from 11m, firing 15 minutes later; the flat queue, however long, does not.
        { eval_time: "20m", alertname: "ImageTaskSidecarQueueBacklogGrowing", exp_alerts: [] },
        {
          eval_time: "40m",
          alertname: "ImageTaskSidecarQueueBacklogGrowing",
          exp_alerts: [
            {
              exp_labels: { severity: "warning", namespace: "growing", job: "image-task-sidecar" },
            },
          ],
        },
      ],
    },
    {
      interval: "1m",
      input_series: [
        // Half the tasks that could succeed fail; the many cancels count for nothing.
        ["failing", "completed", "ok", "0+1x60"],
        ["failing", "failed", "upstream_error", "0+1x60"],
        ["failing", "failed", "cancelled", "0+5x60"],
        // 1 in 11 fails: below 20 %.
        ["healthy", "completed", "ok", "0+10x60"],
        ["healthy", "failed", "timeout", "0+1x60"],
      ].map(([namespace, status, reason, values]) => ({
        series: `image_task_sidecar_tasks_finished_total{namespace="${namespace}",${JOB},status="${status}",reason="${reason}"}`,
        values: values!,
      })),
      alert_rule_test: [
        {
          eval_time: "40m",
          alertname: "ImageTaskSidecarTaskFailureRatioHigh",
          exp_alerts: [
            {
              exp_labels: { severity: "warning", namespace: "failing", job: "image-task-sidecar" },
            },
          ],
        },
      ],
    },
    {
      interval: "1m",
      input_series: [
        // The image store goes away at 2m on one replica; the task store stays.
        {
          series: `image_task_sidecar_store_up{namespace="n",${JOB},pod="a",store="images"}`,
          values: "1 1 0x10",
        },
        {
          series: `image_task_sidecar_store_up{namespace="n",${JOB},pod="b",store="images"}`,
          values: "1x12",
        },
        {
          series: `image_task_sidecar_store_up{namespace="n",${JOB},pod="a",store="tasks"}`,
          values: "1x12",
        },
      ],
      alert_rule_test: [
        { eval_time: "3m", alertname: "ImageTaskSidecarStoreUnavailable", exp_alerts: [] },
        {
          eval_time: "5m",
          alertname: "ImageTaskSidecarStoreUnavailable",
          exp_alerts: [
            {
              exp_labels: {
                severity: "critical",
                namespace: "n",
                job: "image-task-sidecar",
                store: "images",
              },
            },
          ],
        },
      ],
    },
  ],
};

/** The rules without their annotations, whose rendered text the unit tests would have to repeat. */
const bareRules = () => ({
  groups: ruleGroups().map((group) => ({
    ...group,
    rules: group.rules.map(({ annotations: _annotations, ...rule }) => rule),
  })),
});

describe("components/monitoring alert rules", () => {
  it("pass promtool check rules: queue backlog, failure ratio, stores, passthrough p99", () => {
    const groups = ruleGroups();
    const names = groups.flatMap((group) => group.rules.map((rule) => rule.alert));
    expect(names).toEqual([
      "ImageTaskSidecarQueueBacklogGrowing",
      "ImageTaskSidecarTaskFailureRatioHigh",
      "ImageTaskSidecarStoreUnavailable",
      "ImageTaskSidecarPassthroughLatencyHigh",
    ]);
    const check = promtool(["check", "rules", "rules.yaml"], { "rules.yaml": { groups } });
    expect(check.status, check.output).toBe(0);
    expect(check.output).toContain("SUCCESS: 4 rules found");
  });

  it("fire on made-up series when they should, and only then (promtool test rules)", () => {
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
  });

  it("each name a severity, a summary, and a runbook section of docs/kubernetes.md", () => {
    const anchors = anchorsOf(readFileSync(join(ROOT, "docs/kubernetes.md"), "utf8"));
    for (const rule of ruleGroups().flatMap((group) => group.rules)) {
      expect(["warning", "critical"], rule.alert).toContain(rule.labels.severity);
      expect(rule.annotations.summary, rule.alert).toBeTruthy();
      const [page, anchor] = rule.annotations.runbook!.split("#");
      expect(page, rule.alert).toBe("docs/kubernetes.md");
      expect(anchors, rule.alert).toContain(anchor);
      expect(anchor).toBe(rule.alert.toLowerCase());
    }
  });
});
