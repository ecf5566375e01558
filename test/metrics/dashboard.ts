import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

/*
 * grafana/image-task-sidecar.json as the tests read it: its panels' queries, and those queries
 * with the dashboard's variables put in as Grafana would.
 */

const ROOT = resolve(import.meta.dirname, "../..");

/** One query of a panel. */
export interface PanelQuery {
  title: string;
  type: string;
  expr: string;
  legendFormat?: string;
}

interface Dashboard {
  panels: Array<{
    title: string;
    type: string;
    targets?: Array<{ expr: string; legendFormat?: string }>;
  }>;
  templating: { list: Array<{ name: string; type: string; query?: unknown }> };
}

/** The dashboard file, parsed. */
export const DASHBOARD = JSON.parse(
  readFileSync(join(ROOT, "grafana/image-task-sidecar.json"), "utf8"),
) as Dashboard;

/** Every query of every panel, in the dashboard's order. */
export const PANEL_QUERIES: PanelQuery[] = DASHBOARD.panels.flatMap((panel) =>
  (panel.targets ?? []).map((target) => ({
    title: panel.title,
    type: panel.type,
    expr: target.expr,
    ...(target.legendFormat ? { legendFormat: target.legendFormat } : {}),
  })),
);

/** The text variables' defaults (`$image_models`), by name. */
const TEXT_VARIABLES = Object.fromEntries(
  DASHBOARD.templating.list
    .filter((variable) => variable.type === "textbox")
    .map((variable) => [variable.name, String(variable.query)]),
);

/**
 * A query as Grafana sends it: `$__rate_interval` as `rateInterval`, the `job` variable's "All"
 * (`.+`), each text variable's default. Throws on a variable it does not know.
 */
export function concrete(expr: string, rateInterval = "1m"): string {
  const done = Object.entries(TEXT_VARIABLES).reduce(
    (text, [name, value]) => text.replaceAll(`$${name}`, value),
    expr.replaceAll("$__rate_interval", rateInterval).replaceAll('"$job"', '".+"'),
  );
  const left = /\$\w+/.exec(done);
  if (left) throw new Error(`unknown dashboard variable ${left[0]} in ${expr}`);
  return done;
}
