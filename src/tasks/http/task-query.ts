import {
  LIST_ORDERS,
  MAX_WAIT_SEC,
  TASK_STATUSES,
  isAnyTaskId,
  type ListOrder,
  type TaskStatus,
} from "../../contract/task-contract.js";
import { ServiceError } from "../../errors/service-error.js";
import type { ListQuery } from "../service/task-service.js";

const STATUSES: readonly TaskStatus[] = TASK_STATUSES;

/** One query parameter as text; sent twice, or as `a[b]=`, it is refused. */
function single(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (typeof value !== "string") {
    throw new ServiceError("invalid_value", `Invalid '${name}': give it once, as a plain value.`, {
      param: name,
    });
  }
  return value;
}

function invalid(name: string, message: string): ServiceError {
  return new ServiceError("invalid_value", `Invalid '${name}': ${message}`, { param: name });
}

/**
 * `GET /v1/images/tasks?limit=&after=&status=&order=`: `limit` 1 to 100
 * (default 20), `after` a task id, `status` one of the four, `order` `desc`
 * (default) or `asc`, as OpenAI's list routes take it. Other parameters are
 * ignored, as OpenAI's list routes do.
 *
 * @throws ServiceError `invalid_value` naming the parameter
 */
export function parseListQuery(query: Record<string, unknown>): ListQuery {
  const limitText = single(query, "limit");
  let limit = 20;
  if (limitText !== undefined) {
    limit = /^\d{1,3}$/.test(limitText) ? Number(limitText) : NaN;
    if (!(limit >= 1 && limit <= 100)) throw invalid("limit", "must be an integer from 1 to 100.");
  }
  const after = single(query, "after");
  if (after !== undefined && !isAnyTaskId(after)) {
    throw invalid("after", "must be the id of one of your tasks (task_... or imgtask_...).");
  }
  const status = single(query, "status");
  if (status !== undefined && !STATUSES.includes(status as TaskStatus)) {
    throw invalid("status", `must be one of ${STATUSES.join(", ")}.`);
  }
  const order = single(query, "order");
  if (order !== undefined && !LIST_ORDERS.includes(order as ListOrder)) {
    throw invalid("order", `must be one of ${LIST_ORDERS.join(", ")}.`);
  }
  return {
    limit,
    ...(after === undefined ? {} : { after }),
    ...(status === undefined ? {} : { status: status as TaskStatus }),
    ...(order === "asc" ? { order } : {}),
  };
}

/**
 * `?wait=N`: seconds from 0 to 60 (fractions allowed), default 0.
 *
 * @throws ServiceError `invalid_value` with `param: "wait"`
 */
export function parseWaitQuery(query: Record<string, unknown>): number {
  const text = single(query, "wait");
  if (text === undefined) return 0;
  const seconds = /^\d{1,2}(\.\d{1,3})?$/.test(text) ? Number(text) : NaN;
  if (!(seconds >= 0 && seconds <= MAX_WAIT_SEC)) {
    throw invalid("wait", `must be a number of seconds from 0 to ${MAX_WAIT_SEC}.`);
  }
  return seconds;
}

/**
 * The `wait` preference of a `Prefer` header (RFC 7240), in whole seconds,
 * capped at 60; undefined when there is none. A hint: a malformed value is
 * ignored, not refused. Several `Prefer` headers arrive joined by commas.
 */
export function parsePreferWait(header: string | undefined): number | undefined {
  if (!header) return undefined;
  for (const preference of header.split(",")) {
    const [token] = preference.split(";");
    const match = /^\s*wait\s*=\s*"?(\d{1,9})"?\s*$/i.exec(token ?? "");
    if (match) return Math.min(Number(match[1]), MAX_WAIT_SEC);
  }
  return undefined;
}
