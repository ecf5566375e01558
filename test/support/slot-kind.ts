/*
 * How a multi-process test file uses its slot (test/support/process-slots.ts). Set by the file
 * as it loads, read when its slot is taken: the file loads (and declares its tests) before the
 * setup file's `beforeAll` runs.
 */

/** Where the declaration lives while a file loads: workers share modules across files. */
const KEY = Symbol.for("image-task-sidecar.test.mostly-waits");

type Flagged = typeof globalThis & { [KEY]?: boolean };

/**
 * Declares that this file mostly waits (a lease running out, a paused Redis, a failover): its
 * processes use a few percent of a core while it holds a slot. It then takes a slot of the
 * waiting pool (`TEST_WAITING_SLOTS`), beside the slots of the files that keep the cores busy.
 * Call it at the top of the file.
 */
export function mostlyWaits(): void {
  (globalThis as Flagged)[KEY] = true;
}

/** Whether the file loading now declared {@link mostlyWaits}; clears the declaration. */
export function takeMostlyWaits(): boolean {
  const flagged = (globalThis as Flagged)[KEY] === true;
  (globalThis as Flagged)[KEY] = false;
  return flagged;
}
