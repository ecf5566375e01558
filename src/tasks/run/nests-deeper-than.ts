/**
 * Whether parsed JSON nests objects and arrays more than `max` levels deep
 * (the top value is level 1). Walked without recursion: a channel's answer
 * nested thousands deep parses (V8's JSON.parse does not recurse) but then
 * overflows the stack of whatever serialises or walks it (`JSON.stringify`
 * when the task is stored), so it is refused where it is read.
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== "object") return false;
  const containers: object[] = [value];
  const depths: number[] = [1];
  while (containers.length > 0) {
    const container = containers.pop() as object;
    const depth = depths.pop() as number;
    if (depth > max) return true;
    const items = Array.isArray(container) ? container : Object.values(container);
    for (const item of items) {
      if (item !== null && typeof item === "object") {
        containers.push(item as object);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}
