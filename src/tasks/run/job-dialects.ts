import type { AsyncDialect } from "../../config/schema/channel-schema.js";
import { bifrostJob } from "./bifrost-job.js";
import type { JobDialect } from "./job-dialect.js";
import { openaiBackgroundJob } from "./openai-background-job.js";
import { sub2apiJob } from "./sub2api-job.js";

/** Each async dialect's client, by its `channels[].async` name. */
export const JOB_DIALECTS: Readonly<Record<AsyncDialect, JobDialect>> = {
  sub2api: sub2apiJob,
  bifrost: bifrostJob,
  "openai-background": openaiBackgroundJob,
};
