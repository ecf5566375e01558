import type { Logger } from "pino";
import { CredentialSealError, type CredentialSealer } from "../auth/credential-sealer.js";
import { createChannelClient } from "../channels/channel-client.js";
import type { Config } from "../config/config-schema.js";
import type { Metrics } from "../metrics/create-metrics.js";
import type { ModelAccess } from "../models/model-access.js";
import { generateImages, type EditFile, type GeneratedImage } from "./generate-images.js";
import type { LeaseEnd, TaskLease } from "./queue/task-queue.js";
import type { TaskStore } from "./store/task-store.js";
import { TaskFailure } from "./task-failure.js";
import type { TaskFinisher } from "./task-finisher.js";
import { isFinished, type TaskRecord } from "./task-record.js";

/** The longest delay a Node timer takes. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Why a run's upstream call was aborted: its lease ended, or its own timeout. */
type AbortReason = LeaseEnd | "timeout";

/** Dependencies of {@link createTaskRunner}. */
export interface TaskRunnerDeps {
  store: TaskStore;
  /** Routes a run to its channels: their own keys, or a forward task's gateway with its key. */
  access: ModelAccess;
  /** Forward mode's sealer, to open a task's `sealedCredential`; absent when forward mode is off. */
  sealer?: CredentialSealer;
  finisher: TaskFinisher;
  metrics: Metrics;
  logger: Logger;
  limits: Config["imageTasks"];
  now: () => number;
  /**
   * How often a run re-reads its task: a task that another process finished
   * (a cancel whose message was lost) or gave to another run stops here too.
   * Default 5 s.
   */
  checkEveryMs?: number;
}

/** Runs tasks the queue hands over, one lease each. */
export type TaskRunner = ReturnType<typeof createTaskRunner>;

const interrupted = (message: string) =>
  ({ code: "interrupted", message, type: "interrupted" }) as const;

/**
 * Runs one task under its lease: `queued -> in_progress` (a new run of a
 * task whose earlier run ended with its holder, until `maxAttempts`), the
 * channel call bounded by the timeout and the lease, then `completed` or
 * `failed`. Only the run holding the lease writes the end (`attempts` names
 * it). A task's own failure never rejects; a store that cannot be written
 * does, and the queue runs the task again later.
 */
export function createTaskRunner(deps: TaskRunnerDeps) {
  const { store, finisher, metrics, logger, limits, now } = deps;
  // The runs' own pools: a generation holds its connection for minutes.
  const client = createChannelClient({ metrics, logger });
  const checkEveryMs = deps.checkEveryMs ?? 5_000;

  /** Ends a run whose generation did not succeed, as the reason says. */
  async function settleFailure(started: TaskRecord, signal: AbortSignal, err: unknown) {
    const { id, attempts } = started;
    const reason = signal.aborted ? (signal.reason as AbortReason) : undefined;
    switch (reason) {
      case "cancelled": // the cancel wrote the failure already
      case "lost": // another run holds the task now
        return;
      case "handback":
        // Not counted as a run: the next one starts it afresh.
        await store.transition(
          id,
          "in_progress",
          { status: "queued", started_at: undefined, attempts: attempts - 1 },
          { attempts },
        );
        return;
      case "shutdown":
        await finisher.fail(
          id,
          "in_progress",
          interrupted("The service stopped while the task was running."),
          { attempts },
        );
        return;
      case "timeout":
        await finisher.fail(
          id,
          "in_progress",
          new TaskFailure(
            "timeout",
            `The image generation did not finish within ${limits.timeoutSec} seconds.`,
            "timeout",
          ).toTaskError(),
          { attempts },
        );
        return;
    }
    let failure: TaskFailure;
    if (err instanceof TaskFailure) {
      failure = err;
    } else {
      logger.error({ err, taskId: id }, "task failed unexpectedly");
      failure = new TaskFailure("upstream_error", "The image generation failed unexpectedly.");
    }
    await finisher.fail(id, "in_progress", failure.toTaskError(), { attempts });
  }

  /** Starts a run: the task moves to `in_progress` under this run's attempt number. */
  async function claim(record: TaskRecord): Promise<TaskRecord | undefined> {
    if (record.status === "in_progress") {
      // Its earlier run ended with its holder (a crash, a lost lease, a failed write).
      if (record.attempts >= limits.maxAttempts) {
        await finisher.fail(
          record.id,
          "in_progress",
          interrupted("The service stopped while the task was running, too often to retry."),
          { attempts: record.attempts },
        );
        return undefined;
      }
      logger.info({ taskId: record.id }, "running again a task whose run was interrupted");
    }
    const startedAtMs = now();
    const started = await store.transition(
      record.id,
      record.status,
      {
        status: "in_progress",
        started_at: Math.floor(startedAtMs / 1000),
        attempts: record.attempts + 1,
      },
      { attempts: record.attempts },
    );
    if (started && record.status === "queued") {
      metrics.taskQueueWait.observe(Math.max(0, startedAtMs / 1000 - record.created));
    }
    return started;
  }

  /**
   * The forward key a task was submitted with, if any. A task whose key cannot
   * be opened fails: running it on the channel's own key would bill the
   * operator for someone else's task.
   */
  async function credentialOf(record: TaskRecord): Promise<string | undefined> {
    if (record.sealedCredential === undefined) return undefined;
    const unavailable = (why: string) =>
      new TaskFailure(
        "credential_unavailable",
        `The key this task was submitted with cannot be used: ${why}.`,
        "invalid_request_error",
      );
    if (!deps.sealer) throw unavailable("forward mode is off");
    try {
      return await deps.sealer.unseal(record.sealedCredential, record.id);
    } catch (err) {
      if (err instanceof CredentialSealError)
        throw unavailable("it was sealed with another secret");
      throw err; // the store holding a generated secret is away: the queue runs the task again
    }
  }

  /**
   * An edit's images from the store; undefined for a generation. A store that
   * cannot be read rejects (the queue runs the task again later).
   */
  async function editFiles(started: TaskRecord): Promise<EditFile[] | undefined> {
    if (started.kind !== "edit") return undefined;
    const inputs = started.inputs ?? [];
    const bytes = await Promise.all(inputs.map((_, index) => store.getInput(started.id, index)));
    return inputs.map((input, index) => ({
      field: input.field,
      mime: input.mime,
      bytes: bytes[index] ?? Buffer.alloc(0),
    }));
  }

  async function generate(started: TaskRecord, files: EditFile[] | undefined, signal: AbortSignal) {
    const candidates = deps.access.route(started.model, await credentialOf(started));
    if (candidates.length === 0) {
      throw new TaskFailure("upstream_unavailable", "No channel serves this model any more.");
    }
    if (files?.some((file) => file.bytes.length === 0)) {
      throw new TaskFailure(
        "invalid_request",
        "The task's input images are no longer stored (it waited longer than they are kept).",
        "invalid_request_error",
      );
    }
    return generateImages({
      candidates,
      body: started.request,
      ...(files ? { files } : {}),
      signal,
      client,
    });
  }

  return {
    async run(lease: TaskLease): Promise<void> {
      const { taskId: id } = lease;
      const record = await store.get(id);
      if (!record || isFinished(record.status) || lease.signal.aborted) return;
      const started = await claim(record);
      if (!started) return;
      const files = await editFiles(started);

      const own = new AbortController();
      const signal = AbortSignal.any([lease.signal, own.signal]);
      // Node fires a timer over 2^31-1 ms (24.8 days) at once, so a longer timeout is capped.
      const timer = setTimeout(
        () => own.abort("timeout" satisfies AbortReason),
        Math.min(limits.timeoutSec * 1000, MAX_TIMER_MS),
      );
      const check = setInterval(() => {
        store.get(id).then(
          (current) => {
            if (current?.status !== "in_progress" || current.attempts !== started.attempts) {
              own.abort(
                (isFinished(current?.status ?? "failed") ? "cancelled" : "lost") as LeaseEnd,
              );
            }
          },
          () => undefined, // the store is away; the lease decides
        );
      }, checkEveryMs);
      let result: { images: GeneratedImage[]; usage?: unknown };
      try {
        try {
          result = await generate(started, files, signal);
        } catch (err) {
          await settleFailure(started, signal, err);
          return;
        }
        await Promise.all(
          result.images.map((image, index) =>
            store.putImage(id, index, image.bytes, finisher.imageTtlMs),
          ),
        );
        const completed = await finisher.complete(id, started.attempts, result);
        // Cancelled, or given to another run, meanwhile: its images go.
        if (!completed) await store.deleteImages(id, result.images.length);
      } finally {
        clearTimeout(timer);
        clearInterval(check);
      }
    },

    close: () => client.close(),
  };
}
