/** Runs one task to its end; never rejects for a task's own failure. */
export type TaskRunner = (taskId: string) => Promise<void>;

/**
 * Hands queued task ids to a runner, at most `maxConcurrent` at once, in
 * the order they came. The limit lives here, so a queue spanning replicas
 * (Redis) can hold it across all of them.
 */
export interface TaskQueue {
  enqueue(taskId: string): void;
  /** Takes a task out before it started; false when it was not waiting. */
  remove(taskId: string): boolean;
  /** Tasks waiting for a slot. */
  depth(): number;
  /** Tasks this process is running now. */
  running(): number;
  start(runner: TaskRunner): void;
  /** Stops starting tasks; resolves when the running ones are done. */
  stop(): Promise<void>;
}

/** The in-process queue for the memory and SQLite stores (one process). */
export function createInProcessQueue(options: { maxConcurrent: number }): TaskQueue {
  const waiting: string[] = [];
  const active = new Set<Promise<void>>();
  let runner: TaskRunner | undefined;
  let stopped = false;

  const pump = () => {
    while (runner && !stopped && active.size < options.maxConcurrent && waiting.length > 0) {
      const taskId = waiting.shift() as string;
      const run: Promise<void> = runner(taskId)
        .catch(() => undefined)
        .finally(() => {
          active.delete(run);
          pump();
        });
      active.add(run);
    }
  };

  return {
    enqueue(taskId) {
      if (waiting.includes(taskId)) return;
      waiting.push(taskId);
      pump();
    },
    remove(taskId) {
      const index = waiting.indexOf(taskId);
      if (index === -1) return false;
      waiting.splice(index, 1);
      return true;
    },
    depth: () => waiting.length,
    running: () => active.size,
    start(taskRunner) {
      runner = taskRunner;
      stopped = false;
      pump();
    },
    async stop() {
      stopped = true;
      await Promise.all([...active]);
    },
  };
}
