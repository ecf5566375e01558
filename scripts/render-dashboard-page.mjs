// The page scripts/render-dashboard.mjs photographs: the dashboard's panels laid out on Grafana's
// grid, drawn with uPlot (from `uplotDir`) from the data their queries gave over [start, end].
import { readFileSync } from "node:fs";
import { join } from "node:path";

/** The HTML of the page, self-contained: uPlot's code and style inlined. */
export function page({ panels, start, end, stepSec, uplotDir }) {
  const css = readFileSync(join(uplotDir, "uPlot.min.css"), "utf8");
  const js = readFileSync(join(uplotDir, "uPlot.iife.min.js"), "utf8");
  return `<!doctype html><html><head><meta charset="utf-8"><style>${css}
  body { margin: 0; background: #111217; color: #ccccdc; font: 13px Inter, "Helvetica Neue", Arial, sans-serif; }
  header { padding: 14px 20px 6px; font-size: 18px; color: #fff; }
  header small { color: #8e8e9e; font-size: 12px; margin-left: 12px; }
  #grid { position: relative; margin: 0 12px; }
  .panel { position: absolute; box-sizing: border-box; background: #181b1f; border: 1px solid #26282e; border-radius: 2px; padding: 6px 8px; overflow: hidden; }
  .panel h3 { margin: 0 0 4px; font-size: 13px; font-weight: 500; color: #ccccdc; }
  .row { position: absolute; font-size: 15px; color: #fff; font-weight: 500; padding-top: 6px; }
  .nodata { color: #8e8e9e; text-align: center; margin-top: 90px; font-size: 14px; }
  .stat { font-size: 38px; font-weight: 500; color: #73bf69; text-align: center; margin-top: 8px; }
  .u-legend { font-size: 11px; color: #ccccdc; text-align: left; }
  .u-legend .u-marker { width: 10px; height: 3px; }
  </style></head><body>
  <header>image-task-sidecar <small>the dashboard's panels, from their queries against Prometheus</small></header>
  <div id="grid"></div>
  <script>${js}</script>
  <script>
  const panels = ${JSON.stringify(panels)};
  const range = [${start}, ${end}];
  const COL = (document.documentElement.clientWidth - 24) / 24, ROW = 34;
  const colors = ["#73bf69", "#f2cc0c", "#5794f2", "#ff780a", "#b877d9", "#f2495c", "#8ab8ff", "#fade2a", "#56a64b", "#ca95e5"];
  const fmt = (unit, v) => {
    if (v == null || Number.isNaN(v)) return "-";
    const scaled = (base, steps) => {
      let i = 0;
      while (Math.abs(v) >= base && i < steps.length - 1) (v /= base), (i += 1);
      return (Number.isInteger(v) ? v : v.toFixed(1)) + " " + steps[i];
    };
    if (unit === "Bps") return scaled(1000, ["B/s", "kB/s", "MB/s", "GB/s"]);
    if (unit === "bytes") return scaled(1024, ["B", "KiB", "MiB", "GiB"]);
    if (unit === "percentunit") return (v * 100).toFixed(v < 0.1 ? 1 : 0) + "%";
    if (unit === "s") return v < 1 ? Math.round(v * 1000) + " ms" : v.toFixed(v < 10 ? 1 : 0) + " s";
    const n = Number.isInteger(v) || Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(1) : v.toFixed(2);
    return unit === "reqps" ? n + " req/s" : unit === "ops" ? n + " /s" : n;
  };
  const grid = document.getElementById("grid");
  let bottom = 0;
  const plots = [];
  for (const p of panels) {
    const { x, y, w, h } = p.gridPos;
    bottom = Math.max(bottom, (y + h) * ROW);
    if (p.type === "row") {
      const row = document.createElement("div");
      row.className = "row";
      Object.assign(row.style, { left: x * COL + "px", top: y * ROW + "px" });
      row.textContent = p.title;
      grid.append(row);
      continue;
    }
    const el = document.createElement("div");
    el.className = "panel";
    Object.assign(el.style, { left: x * COL + 4 + "px", top: y * ROW + 4 + "px", width: w * COL - 8 + "px", height: h * ROW - 8 + "px" });
    el.innerHTML = "<h3></h3>";
    el.querySelector("h3").textContent = p.title;
    grid.append(el);
    if (p.type === "stat") {
      const value = document.createElement("div");
      value.className = "stat";
      value.textContent = fmt(p.unit, p.value ?? 0);
      el.append(value);
      continue;
    }
    if (p.series.length === 0) {
      // As Grafana says when a query matches no series (here: no 5xx at all).
      const none = document.createElement("div");
      none.className = "nodata";
      none.textContent = "No data";
      el.append(none);
      continue;
    }
    const times = [];
    for (let t = range[0]; t <= range[1]; t += ${stepSec}) times.push(t);
    const data = [times, ...p.series.map((s) => {
      const byTime = new Map(s.points);
      return times.map((t) => (byTime.has(t) ? byTime.get(t) : null));
    })];
    const series = [{}, ...p.series.map((s, i) => ({
      label: s.name, stroke: colors[i % colors.length], width: 1.5,
      fill: colors[i % colors.length] + "22", value: (u, v) => fmt(p.unit, v),
    }))];
    const width = w * COL - 26;
    const inner = h * ROW - 8 - 28 - 14;
    const plot = new uPlot({
      width, height: inner - 40, series,
      legend: { live: false },
      cursor: { show: false },
      scales: { y: { range: (u, min, max) => [Math.min(0, min ?? 0), max > 0 ? max * 1.1 : 1] } },
      axes: [
        { stroke: "#8e8e9e", grid: { stroke: "#2c2f36", width: 1 }, ticks: { stroke: "#2c2f36" } },
        { stroke: "#8e8e9e", grid: { stroke: "#2c2f36", width: 1 }, ticks: { stroke: "#2c2f36" }, size: 78,
          values: (u, vals) => vals.map((v) => fmt(p.unit, v)) },
      ],
    }, data, el);
    plots.push({ plot, width, inner });
  }
  grid.style.height = bottom + 8 + "px";
  // Once uPlot has laid its charts out: the legend takes what it needs (some panels have many
  // series), the plot the rest.
  setTimeout(() => {
    for (const { plot, width, inner } of plots) {
      const legend = plot.root.querySelector(".u-legend").offsetHeight;
      plot.setSize({ width, height: Math.max(80, inner - legend - 6) });
    }
    setTimeout(() => (document.body.dataset.ready = "1"), 100);
  }, 100);
  </script></body></html>`;
}
