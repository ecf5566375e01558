/**
 * Task ids become file names, and tool arguments come from a language model that may have been
 * steered by text it read: only this shape (no dots, no separators) ever reaches the disk.
 */
export const TASK_ID_PATTERN = /^task_[A-Za-z0-9_-]{1,200}$/;

/** Guards every place a task id is turned into a path or a URL segment. */
export function isValidTaskId(value: string): boolean {
  return TASK_ID_PATTERN.test(value);
}
