import type { ServerResponse } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import type { DemoJob } from "./demo-background-jobs.js";
import { openEventStream } from "./demo-event-stream.js";
import { clientGoneSignal } from "./demo-http-helpers.js";
import { coarse } from "./demo-image-stream.js";
import type { DemoContext } from "./demo-route.js";
import { drawPicture } from "./draw-demo-images.js";
import { encodePng } from "./png-encoder.js";

/** How often a stream looks whether its job ended. */
const LOOK_EVERY_MS = 50;

/**
 * The event stream of a background image response (`background: true`,
 * `stream: true`), as OpenAI sends it: `response.created`,
 * `response.in_progress`, the image call's item, `partials` partial images
 * spread over the job's time, then `response.completed` (or `.failed`,
 * `.cancelled`) with the whole response. A client that leaves stops the
 * stream, not the job.
 */
export async function streamBackgroundJob(
  res: ServerResponse,
  job: DemoJob,
  partials: number,
  context: DemoContext,
  responseOf: (job: DemoJob, status?: string) => Record<string, unknown>,
): Promise<void> {
  const gone = clientGoneSignal(res);
  const stream = openEventStream(res, 0, gone);
  let sequence = 0;
  const send = (type: string, fields: Record<string, unknown>) =>
    stream.send({ type, sequence_number: sequence++, ...fields }, type);
  const itemId = `ig_${job.id.slice("resp_".length, "resp_".length + 24)}`;
  send("response.created", { response: responseOf(job, "queued") });
  send("response.in_progress", { response: responseOf(job, "in_progress") });
  send("response.output_item.added", {
    output_index: 0,
    item: { id: itemId, type: "image_generation_call", status: "in_progress" },
  });
  const pauseMs = context.imageDelayMs / (partials + 1);
  for (let k = 0; k < partials; k += 1) {
    // A job that finished while the stream paused still gets the drafts it promised (at once):
    // on a busy machine its timer may fire first, and a client should not see fewer by chance.
    if (job.state === "running" && !(await pause(pauseMs, gone))) return;
    if (job.state !== "running" && job.state !== "completed") break;
    const draft = coarse(drawPicture(job.request, 0), 2 ** (3 + partials - k));
    send("response.image_generation_call.partial_image", {
      output_index: 0,
      item_id: itemId,
      partial_image_index: k,
      partial_image_b64: encodePng(draft).toString("base64"),
    });
  }
  while (job.state === "running") {
    if (!(await pause(LOOK_EVERY_MS, gone))) return;
  }
  if (gone.aborted) return;
  const response = responseOf(job);
  const output = (response.output as unknown[])[0];
  if (output) send("response.output_item.done", { output_index: 0, item: output });
  send(`response.${job.state}`, { response });
  stream.end();
}

/** Sleeps `ms`; false when the client went away meanwhile. */
async function pause(ms: number, gone: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal: gone });
    return true;
  } catch {
    return false;
  }
}
