import type { TaskRecord } from "../core/task-record.js";

/**
 * A task whose image bytes a release before the image store kept in the
 * task store: results and an edit's inputs, by index (a missing index has
 * expired, or was never written).
 */
export interface LegacyTask {
  id: string;
  /** The record as read; `undefined` when the task is gone (its bytes are orphans). */
  record: TaskRecord | undefined;
  images: ReadonlyMap<number, Buffer>;
  inputs: ReadonlyMap<number, Buffer>;
  /** The backend's version of `record`, for {@link LegacyTaskData.settle}'s compare-and-set. */
  version: string;
}

/**
 * What releases before the image store left in a task store, as the upgrade
 * step reads and clears it. One implementation per persistent backend
 * (SQLite, Redis); the memory store never holds any.
 */
export interface LegacyTaskData {
  /** Up to `limit` tasks that still have bytes in the task store; none once all are settled. */
  tasksWithBytes(limit: number): Promise<LegacyTask[]>;
  /**
   * Writes `record` (the task with its images' keys) if the task is as it
   * was read, and frees its bytes; `record` undefined only frees them.
   * Resolves false, writing nothing, when the task changed in between (the
   * caller reads it again).
   */
  settle(task: LegacyTask, record: TaskRecord | undefined): Promise<boolean>;
  /** A task read again, for another try at {@link settle}. */
  reload(id: string): Promise<LegacyTask>;
  /** Ends the step once nothing is left (SQLite drops the old table). */
  finish(): Promise<void>;
  /** A value an earlier release kept in the store's meta (forward mode's secret). */
  getMeta(key: string): Promise<string | undefined>;
  /** Deletes such a value, its bytes overwritten where the backend can. */
  deleteMeta(key: string): Promise<void>;
}
