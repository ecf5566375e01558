// The few task calls the bench makes itself (the load goes through the load generator).
import { request } from "undici";
import { AUTH } from "./processes.mjs";
import { sleep } from "./stats.mjs";

/** GET /v1/images/tasks/{id}[?wait=N]: resolves `{status, task}` (task undefined on 404). */
export async function getTask(url, id, { waitSec, signal } = {}) {
  const query = waitSec ? `?wait=${waitSec}` : "";
  const res = await request(`${url}/v1/images/tasks/${id}${query}`, {
    headers: AUTH,
    signal,
    headersTimeout: (waitSec ?? 0) * 1000 + 15_000,
  });
  const text = await res.body.text();
  return { status: res.statusCode, task: res.statusCode === 200 ? JSON.parse(text) : undefined };
}

/** Waits (with ?wait=) until task `id` is finished; resolves its last state. */
export async function waitFinished(url, id, { signal, deadline }) {
  for (;;) {
    signal?.throwIfAborted();
    const left = Math.floor((deadline - Date.now()) / 1000);
    if (left < 1) throw new Error(`task ${id} not finished in time`);
    const { status, task } = await getTask(url, id, { waitSec: Math.min(30, left), signal });
    if (status === 404) return { id, status: "expired" }; // finished and already gone
    if (task && (task.status === "completed" || task.status === "failed")) return task;
  }
}

/** Polls until task `id` answers 404 (expired); resolves false if `deadline` comes first. */
export async function waitGone(url, id, { signal, deadline, everyMs = 500 }) {
  while (Date.now() < deadline) {
    signal?.throwIfAborted();
    if ((await getTask(url, id, { signal })).status === 404) return true;
    await sleep(everyMs);
  }
  return false;
}
