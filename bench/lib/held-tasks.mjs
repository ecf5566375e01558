// A store that already holds many tasks: filled with finished tasks before a service opens
// it, through the measured build's own store code (its dist/), then measured: whether a write
// (and a poll) costs more as tasks pile up.
import { createHash, randomBytes } from "node:crypto";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { AUTH, KEY, serviceConfig, startService } from "./processes.mjs";
import { REDIS_URL } from "./redis-keys.mjs";
import { waitFinished } from "./task-client.mjs";

/** The owner the service gives the bench's key: the held tasks are that key's own. */
export const BENCH_OWNER = `key:${createHash("sha256").update(KEY).digest("hex").slice(0, 32)}`;

/** Tasks written at once (Redis: that many in flight). */
const BATCH = 200;
/** Tasks written after the fill, whose write cost is measured. */
const PROBE = 1000;

/**
 * Writes `count` finished tasks of the bench key (failed: records without image bytes) into
 * the store `config` names, each through `create` and `transition` as the service writes
 * them; then {@link PROBE} more, whose cost (the bench process's CPU per task) is the store
 * code's own cost of a write with that many tasks held. Resolves the ids and that cost.
 */
export async function fillStore({ dist, config, count }) {
  const { parseConfig } = await import(pathToFileURL(join(dist, "config/load-config.js")).href);
  const { openTaskBackend } = await import(
    pathToFileURL(join(dist, "tasks/open-task-backend.js")).href
  );
  const { pino } = await import("pino");
  const backend = await openTaskBackend(parseConfig(config), pino({ level: "silent" }));
  const { store } = backend;
  const retentionMs = config.imageTasks.retentionSec * 1000;
  const ids = [];
  let probed;
  try {
    for (let done = 0; done < count + PROBE; done += BATCH) {
      if (done >= count) probed ??= process.cpuUsage();
      const batch = Array.from({ length: Math.min(BATCH, count + PROBE - done) }, heldTask);
      await Promise.all(
        batch.map(async (record) => {
          await store.create(record);
          const nowMs = Date.now();
          await store.transition(
            record.id,
            "queued",
            {
              status: "failed",
              completed_at: Math.floor(nowMs / 1000),
              expires_at: Math.ceil((nowMs + retentionMs) / 1000),
              error: { code: "upstream_error", message: "held by the bench", type: "server_error" },
            },
            { ttlMs: retentionMs },
          );
        }),
      );
      ids.push(...batch.map((record) => record.id));
    }
  } finally {
    await backend.close();
  }
  const cpu = process.cpuUsage(probed);
  return { ids, writeCpuUs: (cpu.user + cpu.system) / PROBE };
}

function heldTask() {
  return {
    id: `task_${randomBytes(16).toString("base64url")}`,
    owner: BENCH_OWNER,
    status: "queued",
    model: "gpt-image-1",
    request: { model: "gpt-image-1", prompt: "a task the store holds", n: 1, size: "1024x1024" },
    responseFormat: "b64_json",
    created: Math.floor(Date.now() / 1000),
    attempts: 0,
  };
}

const cpuOf = async (service) => (await service.stats()).cpu;
const cpuMicrosPer = (before, after, requests) =>
  (after.user - before.user + after.system - before.system) / requests;

/**
 * For each setup and each count: fills a fresh store with `count` finished tasks of the
 * bench key, starts the service on it, and measures submissions and polls of held tasks
 * (CPU per request is the service's). `onRow` gets each row as it is measured.
 */
export async function measureHeldTasks(ctx, options) {
  const { channel, loader, setups, counts, durationMs, submitRequest, onRow } = options;
  const timeoutMs = () => Math.max(1000, ctx.remainingMs() - 2000);
  for (const setup of setups) {
    for (const count of counts) {
      ctx.check();
      const config = serviceConfig({
        channelUrl: channel.url,
        storeUrl: setup.redis
          ? REDIS_URL
          : `sqlite://${join(ctx.tempDir, `held-${count}-${Date.now()}.db`)}`,
        prefix: setup.redis ? ctx.redisPrefix(`held-${count}`) : undefined,
      });
      const filling = Date.now();
      const { ids, writeCpuUs } = await fillStore({ dist: ctx.options.dist, config, count });
      const fillSec = (Date.now() - filling) / 1000;
      ctx.log(`tasks: ${setup.label}: ${count} tasks held, filled in ${fillSec.toFixed(1)} s`);
      const service = await startService(ctx, config);
      try {
        const origins = [service.url];
        const load = { origins, concurrency: 32, durationMs };
        await loader.run({
          ...load,
          requests: [submitRequest],
          count: 40,
          durationMs: undefined,
          concurrency: 4,
          timeoutMs: timeoutMs(),
        });
        let before = await cpuOf(service);
        const submitted = await loader.run({
          ...load,
          requests: [submitRequest],
          collectIds: true,
          timeoutMs: timeoutMs(),
        });
        let after = await cpuOf(service);
        const row = {
          label: setup.label,
          held: count,
          fillSec,
          writeCpuUs,
          submissions: {
            perSec: submitted.rps,
            cpuUsPerRequest: cpuMicrosPer(before, after, submitted.ok),
          },
        };
        // The submitted tasks run to their end first: their runs are not the polls' cost.
        if (submitted.ids?.length) {
          await waitFinished(origins[0], submitted.ids.at(-1), {
            signal: ctx.signal,
            deadline: Date.now() + timeoutMs(),
          });
        }
        // Polls of held tasks, spread over the whole store.
        const step = Math.max(1, Math.floor(ids.length / 2000));
        const polled = ids.filter((_, i) => i % step === 0);
        before = await cpuOf(service);
        const polls = await loader.run({
          ...load,
          requests: polled.map((id) => ({ path: `/v1/images/tasks/${id}`, headers: AUTH })),
          timeoutMs: timeoutMs(),
        });
        after = await cpuOf(service);
        row.polls = { perSec: polls.rps, cpuUsPerRequest: cpuMicrosPer(before, after, polls.ok) };
        onRow(row);
      } finally {
        await service.stop();
      }
    }
  }
}
