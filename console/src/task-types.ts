/*
 * The task as the API shows it: the service's own contract module, compiled
 * beside the console (console/tsconfig.json includes it), so the browser
 * renders exactly the shape the service presents. Named here as the
 * console's modules know them.
 */
export {
  TASK_STATUSES,
  isFinished,
  TASK_ID_PATTERN as TASK_ID,
} from "../../src/contract/task-contract.js";
export type {
  ListOrder,
  TaskStatus,
  TaskParameters,
  TaskUsage,
  TaskDeleted,
  TaskViewImage as TaskImage,
  TaskViewPartial as TaskPartial,
  TaskView as Task,
  TaskPage,
} from "../../src/contract/task-contract.js";
