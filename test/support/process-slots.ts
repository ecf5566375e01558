import {
  appendFileSync,
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, expect } from "vitest";
import { cpuSeconds } from "./cpu-seconds.js";
import { isAlive } from "./process-alive.js";

/*
 * Test files that start real processes (the service's bin, private Redis
 * servers, Chromium) take a slot for their whole run: at most SLOTS of them
 * run at once, whichever worker they landed on, while in-process files run
 * beside them. Several at once on two cores starve each other past their
 * deadlines and leases. A slot is a file created exclusively; one whose
 * holder died is taken over.
 */

/** Process-starting files at once (TEST_PROCESS_SLOTS, default 2). */
const SLOTS = Math.max(1, Number(process.env.TEST_PROCESS_SLOTS) || 2);
/**
 * TEST_SLOT_POOL=NAME: slots of a pool of their own, not shared with runs that set none. CI runs
 * the bin's own tests on Node 20 beside the multi-process run on Node 22 once the in-process
 * suite is done: in the shared pool they waited for that run's slots (about a minute).
 */
const POOL = (process.env.TEST_SLOT_POOL ?? "").replace(/[^a-z0-9-]/gi, "");
const DIR = join(tmpdir(), `image-task-sidecar-test-slots${POOL ? `-${POOL}` : ""}`);
/** A file waiting for a slot waits this long at most (its hook's own timeout). */
const WAIT_MS = 60 * 60_000;

/**
 * TEST_SLOT_LOG=FILE appends a line per file: how long it waited for its slot and held it. The
 * files that hold slots longest are the multi-process run's critical path (CI's longest part).
 */
const LOG = process.env.TEST_SLOT_LOG;

let held: string | undefined;
let asked = 0;
let taken = 0;
let cpuAtTake = 0;

beforeAll(async () => {
  mkdirSync(DIR, { recursive: true });
  asked = Date.now();
  for (;;) {
    for (let slot = 0; slot < SLOTS; slot += 1) {
      const path = join(DIR, `slot-${slot}`);
      if (take(path)) {
        held = path;
        taken = Date.now();
        cpuAtTake = cpuSeconds();
        return;
      }
    }
    await sleep(200);
  }
}, WAIT_MS);

afterAll(() => {
  if (held) rmSync(held, { force: true });
  held = undefined;
  if (LOG) {
    const file = expect.getState().testPath ?? "?";
    const cpu = Math.round(cpuSeconds() - cpuAtTake);
    const line = `${Math.round((Date.now() - taken) / 1000)} s held, ${cpu} CPU-s, ${Math.round((taken - asked) / 1000)} s waited: ${file}\n`;
    appendFileSync(LOG, line);
  }
});

/** Takes `path` when it is free or its holder is gone. */
function take(path: string): boolean {
  try {
    const fd = openSync(path, "wx");
    writeFileSync(fd, String(process.pid));
    closeSync(fd);
    return true;
  } catch {
    if (alive(holderOf(path))) return false;
    rmSync(path, { force: true });
    return false;
  }
}

function holderOf(path: string): number {
  try {
    return Number(readFileSync(path, "utf8"));
  } catch {
    return 0;
  }
}

function alive(pid: number): boolean {
  return !Number.isInteger(pid) || pid <= 0 || isAlive(pid); // not a pid yet: being written
}
