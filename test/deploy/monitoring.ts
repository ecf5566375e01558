import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { KUSTOMIZE_ROOT } from "./kustomize.js";

/** One alerting rule of components/monitoring's PrometheusRule. */
export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** The rule groups of the PrometheusRule, as a Prometheus rule file holds them. */
export function ruleGroups(): Array<{ name: string; rules: AlertRule[] }> {
  const rule = parseYaml(
    readFileSync(join(KUSTOMIZE_ROOT, "components/monitoring/prometheus-rule.yaml"), "utf8"),
  ) as { spec: { groups: Array<{ name: string; rules: AlertRule[] }> } };
  return rule.spec.groups;
}
