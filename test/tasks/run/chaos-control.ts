import type { IncomingMessage, ServerResponse } from "node:http";
import { TINY_PNG_B64 } from "../../support/fake-answers.js";

/*
 * The random channel's control tasks: every call about one is answered as a well-behaved
 * gateway answers it, on every route. Among the random answers they must end completed (unless
 * the test stops them): so every seed's mix holds tasks that end well, and a service that fails
 * a good answer among bad ones is seen.
 */

/** Whether task `n` is a control task: every eighth, from 2 (2, 10, 18...). */
export function isControl(n: number): boolean {
  return n % 8 === 2;
}

/** What {@link answerWell} needs of the call. */
export interface WellCall {
  route: string;
  path: string;
  task: number;
  raw: Buffer;
  req: IncomingMessage;
  res: ServerResponse;
  record(what: string, paid?: boolean): unknown;
}

const image = () => ({ created: 1, data: [{ b64_json: TINY_PNG_B64 }] });
const imageOutput = [{ type: "image_generation_call", status: "completed", result: TINY_PNG_B64 }];
const message = {
  type: "message",
  id: "msg_1",
  status: "completed",
  role: "assistant",
  content: [{ type: "output_text", text: "a haiku", annotations: [] }],
};

/** Answers the call well: the image, the job accepted, the job done, the response completed. */
export function answerWell(call: WellCall): void {
  const { route, res } = call;
  const streamed = /"stream"\s*:\s*true/.test(call.raw.toString("latin1"));
  const json = (status: number, body: unknown) =>
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  const id = `${route === "submit:openai-background" ? "resp_" : "job_"}${call.task}_well`;
  if ((route === "generate" || route === "edit") && streamed) {
    call.record("well: streamed image", true);
    const kind = route === "generate" ? "image_generation" : "image_edit";
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(event({ type: `${kind}.partial_image`, b64_json: TINY_PNG_B64 }));
    res.end(event({ type: `${kind}.completed`, b64_json: TINY_PNG_B64 }));
  } else if (route === "generate" || route === "edit") {
    call.record("well: image", true);
    json(200, image());
  } else if (route === "submit:sub2api" || route === "submit:bifrost") {
    call.record(`well: submitted ${id}`, true);
    json(route === "submit:bifrost" ? 202 : 200, { id, task_id: id, status: "processing" });
  } else if (route === "submit:openai-background") {
    call.record(`well: submitted ${id}`, true);
    json(200, { id, object: "response", status: "queued" });
  } else if (route === "poll:sub2api" || route === "poll:bifrost") {
    call.record("well: job completed");
    json(200, { id: lastPart(call.path), status: "completed", result: image(), http_status: 200 });
  } else if (route === "poll:openai-background") {
    call.record("well: response completed");
    json(200, {
      id: lastPart(call.path),
      object: "response",
      status: "completed",
      output: imageOutput,
    });
  } else if (route === "respond") {
    call.record("well: response completed", true);
    json(200, { id: "resp_up", object: "response", status: "completed", output: [message] });
  } else {
    call.record(`well: ${route}`);
    json(200, { id: lastPart(call.path), status: "cancelled" });
  }
}

function event(data: unknown): string {
  return `data: ${JSON.stringify(data)}\n\n`;
}

function lastPart(path: string): string {
  return path.split("/").at(-1) ?? "";
}
