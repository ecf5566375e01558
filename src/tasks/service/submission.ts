import type { Span } from "../../tracing/tracer.js";
import type { ListOrder } from "../../contract/task-contract.js";
import type { TaskInput, TaskStatus } from "../core/task-record.js";
import type { SubmitTaskRequest } from "./task-schemas.js";

/** An edit's input image, checked (PNG, JPEG or WebP), as the route read it. */
export interface EditInput {
  field: TaskInput["field"];
  mime: string;
  bytes: Buffer;
}

/** What a submission asks for: a generation, or an edit of `inputs`. */
export interface Submission {
  /** The parsed fields (an edit's besides its images). */
  request: SubmitTaskRequest;
  /** An edit's images, in the order they go to the channel; absent for a generation. */
  inputs?: EditInput[];
}

/** How a submission came. */
export interface SubmitOptions {
  idempotencyKey?: string;
  /** The origin the client reached the service at: the base of image URLs in its webhook event. */
  baseUrl: string;
  /** The submission's span: the task's trace starts there (a no-op span when tracing is off). */
  span?: Span;
  /** The submission's `req_id`: the task's lines carry it. */
  reqId?: string;
  /**
   * The async dialect it came in, which decides how the task is shown (and
   * sub2api's, its `imgtask_` id); absent: the service's own.
   */
  dialect?: "sub2api" | "bifrost";
  /**
   * Seconds to keep the task once finished (Bifrost's
   * `x-bf-async-job-result-ttl`); capped by `imageTasks.retentionSec`, its default.
   */
  retentionSec?: number;
}

/** A page of the task list. */
export interface ListQuery {
  limit: number;
  after?: string;
  status?: TaskStatus;
  /** By creation; default `desc` (newest first). */
  order?: ListOrder;
}
