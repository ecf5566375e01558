import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../../auth/principal.js";
import { clientGone } from "../../http/client-gone.js";
import type { ImageTasks } from "../create-image-tasks.js";
import { idempotencyKeyOf } from "../events/submit-and-watch.js";
import { pollHeaders } from "./poll-headers.js";
import { presentTask, type PresentDeps, type TaskView } from "../view/present-task.js";
import { sendTaskView } from "../view/send-task-view.js";
import { isFinished, type TaskRecord } from "../task-record.js";
import { parsePreferWait, parseWaitQuery } from "./task-query.js";
import type { Submission } from "../service/task-service.js";

/** Dependencies of {@link createTaskAnswers}. */
export interface TaskAnswersDeps {
  tasks: ImageTasks;
  pollIntervalSec: number;
}

/**
 * The origin of the request's image URLs and `Location` (see `publicBaseUrl`),
 * asked when the answer needs it, so a bad Host fails at the same step on
 * every path.
 */
export type BaseUrlOf = () => string;

/** Reads a request header as one string (repeated ones joined, as Node joins most). */
function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(", ") : value;
}

function setHeaders(res: ServerResponse, headers: Record<string, string>): void {
  for (const name in headers) res.setHeader(name, headers[name] as string);
}

/**
 * A submission's answer and a poll's, on plain Node requests: Express's
 * router and the task lane beside it call the same code, so they answer
 * alike (status, headers, body, and which step fails first).
 */
export class TaskAnswers {
  constructor(private readonly deps: TaskAnswersDeps) {}

  /**
   * Creates the task (or replays it), then, with `Prefer: wait=N`, waits up
   * to N seconds: finished by then, 200 with the result; else the usual 202.
   */
  async submission(
    req: IncomingMessage,
    res: ServerResponse,
    principal: Principal,
    submission: Submission,
    baseUrlOf: BaseUrlOf,
  ): Promise<void> {
    const { service } = this.deps.tasks;
    const idempotencyKey = idempotencyKeyOf(req);
    const baseUrl = baseUrlOf();
    const wait = parsePreferWait(header(req, "prefer"));
    const { record, replayed } = await service.submit(principal, submission, {
      idempotencyKey,
      baseUrl,
    });
    let current = record;
    if (wait) {
      // The task exists whatever happens now: a failed wait answers what is known, 202.
      current = await service
        .waitFor(principal, record.id, wait * 1000, clientGone(res))
        .catch(() => record);
    }
    const finished = wait !== undefined && isFinished(current.status);
    setHeaders(res, pollHeaders(current, this.deps.pollIntervalSec));
    res.setHeader("Location", `${baseUrl}/v1/images/tasks/${record.id}`);
    if (replayed) res.setHeader("Idempotent-Replayed", "true");
    if (finished) res.setHeader("Preference-Applied", `wait=${wait}`);
    await sendTaskView(
      res,
      finished ? 200 : 202,
      await this.view(current, baseUrl, finished || replayed ? "full" : "none"),
    );
  }

  /**
   * `GET /v1/images/tasks/{id}` with its parsed query: `?wait=N`, and
   * `?links=service` for the service's own image links whatever
   * `images.links` says (what the MCP server downloads from).
   */
  async poll(
    res: ServerResponse,
    principal: Principal,
    id: string,
    query: Record<string, unknown>,
    baseUrlOf: BaseUrlOf,
  ): Promise<void> {
    const wait = parseWaitQuery(query);
    // A wait of 0 answers at once: no need to watch for the client going away.
    const gone = wait > 0 ? clientGone(res) : undefined;
    const record = await this.deps.tasks.service.waitFor(principal, id, wait * 1000, gone);
    setHeaders(res, pollHeaders(record, this.deps.pollIntervalSec));
    const links = query.links === "service" ? "service" : undefined;
    await sendTaskView(res, 200, await this.view(record, baseUrlOf(), "full", links));
  }

  private view(
    record: TaskRecord,
    baseUrl: string,
    data: PresentDeps["data"],
    links?: PresentDeps["links"],
  ): Promise<TaskView> {
    const { images } = this.deps.tasks;
    return presentTask(record, { images, baseUrl, data, ...(links ? { links } : {}) });
  }
}

/** The answers of the task routes that both Express's router and the task lane serve. */
export function createTaskAnswers(deps: TaskAnswersDeps): TaskAnswers {
  return new TaskAnswers(deps);
}
