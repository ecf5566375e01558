/**
 * How different channels' JSON parsers read a body's top-level `model`: a
 * parser that keeps the first duplicate, one that keeps the last (Node,
 * Python), and Go's encoding/json, which matches keys case-insensitively
 * (the last match wins). Used by the fake channel to log what it "read".
 */
export interface ModelReadings {
  first?: unknown;
  last?: unknown;
  /** Go's encoding/json into a struct with a `model` field. */
  goLike?: unknown;
}

/** The top-level entries of a JSON object in source order, duplicates kept. */
export function topLevelEntries(text: string): Array<[string, unknown]> {
  let i = 0;
  const ws = () => {
    while (i < text.length && /\s/.test(text[i] as string)) i += 1;
  };
  const value = (): unknown => {
    ws();
    const start = i;
    skipValue();
    return JSON.parse(text.slice(start, i)) as unknown;
  };
  const skipString = () => {
    i += 1;
    while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i += 1;
  };
  const skipValue = () => {
    ws();
    const c = text[i];
    if (c === '"') return skipString();
    if (c === "{" || c === "[") {
      let depth = 0;
      do {
        const d = text[i];
        if (d === '"') {
          skipString();
          continue;
        }
        if (d === "{" || d === "[") depth += 1;
        if (d === "}" || d === "]") depth -= 1;
        i += 1;
      } while (depth > 0);
      return;
    }
    while (i < text.length && !/[,}\]\s]/.test(text[i] as string)) i += 1;
  };
  const entries: Array<[string, unknown]> = [];
  ws();
  if (text[i] !== "{") return entries;
  i += 1;
  for (;;) {
    ws();
    if (text[i] === "}") break;
    const start = i;
    skipString();
    const key = JSON.parse(text.slice(start, i)) as string;
    ws();
    i += 1; // :
    entries.push([key, value()]);
    ws();
    if (text[i] === ",") i += 1;
  }
  return entries;
}

/** Go's key matching: Unicode simple case folding (ASCII case for "model"). */
const goFolds = (key: string) => key.toLowerCase() === "model";

export function modelReadings(text: string): ModelReadings {
  try {
    const entries = topLevelEntries(text);
    const exact = entries.filter(([key]) => key === "model");
    const folded = entries.filter(([key]) => goFolds(key));
    return { first: exact[0]?.[1], last: exact.at(-1)?.[1], goLike: folded.at(-1)?.[1] };
  } catch {
    return {};
  }
}
