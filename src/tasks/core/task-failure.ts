import type { TaskError } from "./task-record.js";

/** Why a task failed, with the code clients see in `error.code`. */
export class TaskFailure extends Error {
  readonly code: string;
  readonly type: string;

  constructor(code: string, message: string, type = "image_generation_error") {
    super(message);
    this.name = "TaskFailure";
    this.code = code;
    this.type = type;
  }

  toTaskError(): TaskError {
    return { code: this.code, message: this.message, type: this.type };
  }
}
