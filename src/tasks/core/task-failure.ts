import type { TaskError } from "./task-record.js";

/** Why a task failed, with the code clients see in `error.code`. */
export class TaskFailure extends Error {
  readonly code: string;
  readonly type: string;
  /**
   * Set for a channel's error answer: the status the synchronous route
   * answers for the same answer (kept with the failed task for the dialects
   * that show one).
   */
  readonly status: number | undefined;

  constructor(
    code: string,
    message: string,
    type = "image_generation_error",
    options: { status?: number } = {},
  ) {
    super(message);
    this.name = "TaskFailure";
    this.code = code;
    this.type = type;
    this.status = options.status;
  }

  toTaskError(): TaskError {
    return { code: this.code, message: this.message, type: this.type };
  }
}
