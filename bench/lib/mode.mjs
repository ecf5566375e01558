// The run's size: "smoke" (tiny counts, to see that it works; its figures mean nothing),
// "quick" (a few minutes, rough figures) or "full".

/** `values[mode]`, falling back to `values.quick` for smoke and to `values.full`. */
export const pick = (options, values) =>
  values[options.mode] ?? (options.mode === "smoke" ? values.quick : undefined) ?? values.full;
