/**
 * Compiles model ids and `*` globs into one predicate. Only `*` is special,
 * so ids with dots or slashes (`meta/llama-3.1`) match literally.
 */
export function compileModelPatterns(patterns: readonly string[]): (model: string) => boolean {
  const exact = new Set<string>();
  const globs: RegExp[] = [];
  for (const pattern of patterns) {
    if (pattern.includes("*")) {
      const source = pattern
        .split("*")
        .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
        .join(".*");
      globs.push(new RegExp(`^${source}$`));
    } else {
      exact.add(pattern);
    }
  }
  return (model) => exact.has(model) || globs.some((glob) => glob.test(model));
}

/** Whether a pattern list holds a glob, i.e. cannot be listed without asking the channel. */
export function hasGlob(patterns: readonly string[]): boolean {
  return patterns.some((pattern) => pattern.includes("*"));
}

/** The task API's own rule: only slow `gpt-image-*` models go through it. */
export const isTaskModel = compileModelPatterns(["gpt-image-*"]);
