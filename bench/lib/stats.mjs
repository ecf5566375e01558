// Small numeric helpers.

export const median = (values) => {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

export const min = (values) => {
  const finite = values.filter((v) => Number.isFinite(v));
  return finite.length ? Math.min(...finite) : null;
};

export const max = (values) => {
  const finite = values.filter((v) => Number.isFinite(v));
  return finite.length ? Math.max(...finite) : null;
};

/** `a / b`, or null when either is missing. */
export const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b !== 0 ? a / b : null);

/** CPU microseconds between two `process.cpuUsage()` readings. */
export const cpuMicros = (before, after) =>
  after.cpu.user + after.cpu.system - before.cpu.user - before.cpu.system;

export const MIB = 1024 * 1024;

/** A number for a table cell: `digits` decimals, thousands separated; "-" when missing. */
export function fmt(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return "-";
  if (typeof value !== "number") return String(value);
  return value.toLocaleString("en-US", {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

/** A ratio as `1.23x`. */
export const fmtRatio = (value) =>
  value === null || value === undefined ? "-" : `${fmt(value, 2)}x`;

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The median of `values` with its spread (min and max), or null when there is none. */
export function spread(values) {
  const finite = (values ?? []).filter((v) => Number.isFinite(v));
  if (finite.length === 0) return null;
  return { median: median(finite), min: min(finite), max: max(finite), n: finite.length };
}

/** `median (min–max)` with `format` for each number; the median alone for one value. */
export function fmtSpread(s, format = (v) => fmt(v)) {
  if (!s) return "-";
  if (s.n < 2 || s.min === s.max) return format(s.median);
  return `${format(s.median)} (${format(s.min)}–${format(s.max)})`;
}
