import { setTimeout as sleep } from "node:timers/promises";

/**
 * The pauses between one wait's polls: 25 ms, then half as long again each time, up to 100 ms.
 * Each poll is a request to the service (and its store), and a wait stretched on a loaded machine
 * (CI's: four times as long) polled 40 times a second for all of it: CPU the run lacked there
 * (the task and Responses files spent 11 % less CPU polling this way, on an idle machine).
 */
export function pollPauses(): () => Promise<void> {
  let ms = 25;
  return () => {
    const pause = sleep(ms);
    ms = Math.min(100, ms * 1.5);
    return pause;
  };
}
