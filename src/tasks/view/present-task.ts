import { randomBytes } from "node:crypto";
import { ServiceError } from "../../errors/service-error.js";
import type { ImageObject } from "../../images/image-store.js";
import type { TaskImages } from "../images/task-images.js";
import type {
  TaskParameters,
  TaskUsage,
  TaskView as ContractView,
  TaskViewImage as ContractImage,
  TaskViewPartial as ContractPartial,
} from "../../contract/task-contract.js";
import type { TaskRecord } from "../core/task-record.js";

export type { TaskParameters } from "../../contract/task-contract.js";

/** Per process: no text a channel or client sends can name a marker. */
const NONCE = randomBytes(12).toString("hex");
let markers = 0;
/** The images a {@link stringifyView} in progress wrote the markers of, in order. */
let written: PendingImage[] | undefined;

/**
 * A `b64_json` payload not read yet: in JSON it is a marker, which
 * `sendTaskView` replaces with the image's base64, streamed from the image
 * store. No poll builds a whole image's base64 in memory.
 */
export class PendingImage {
  /** `__b64_<nonce>_<n>__`: unique in the process. */
  readonly marker = `__b64_${NONCE}_${(markers = (markers + 1) % Number.MAX_SAFE_INTEGER)}__`;

  constructor(
    /** Decoded bytes: the base64 is `4 * ceil(size / 3)` characters. */
    readonly size: number,
    /** Opens the bytes; undefined when they are no longer stored. */
    readonly open: (signal?: AbortSignal) => Promise<ImageObject | undefined>,
  ) {}

  toJSON(): string {
    written?.push(this);
    return this.marker;
  }
}

/**
 * A view's JSON, and the images whose markers it holds in the order they
 * appear: JSON.stringify meets them where it writes them, which spares a
 * walk of the view and a search of the text for markers on every poll.
 */
export function stringifyView(view: unknown): { text: string; images: PendingImage[] } {
  const images: PendingImage[] = [];
  written = images;
  try {
    return { text: JSON.stringify(view), images };
  } finally {
    written = undefined;
  }
}

/** One image of a task as clients see it, its base64 read when sent. */
export type TaskViewImage = ContractImage<PendingImage>;

/** A partial image of a running task as clients see it. */
export type TaskViewPartial = ContractPartial<PendingImage>;

/**
 * The fields of the channel's body shown in {@link TaskParameters}, by type.
 * The events' bus carries the same ones (`busRecord`), and no other.
 */
const SHOWN_TEXT = [
  "size",
  "quality",
  "background",
  "output_format",
  "moderation",
  "input_fidelity",
];
const SHOWN_NUMBERS = ["n", "output_compression"];

/** A task as clients see it (the contract's view), `b64_json` payloads still to be read. */
export type TaskView = ContractView<PendingImage>;

/** What {@link presentTask} needs besides the record. */
export interface PresentDeps {
  /** The images of tasks: their links, and their bytes for `b64_json`. */
  images: Pick<TaskImages, "link" | "open" | "partialLink" | "openPartial">;
  /** Origin the service's own image links start with, e.g. `https://images.example.com`. */
  baseUrl: string;
  /** `service`: the service's own links whatever `images.links` says (`?links=service`). */
  links?: "service";
  /**
   * `data` as GET shows it (`full`), without `b64_json` payloads (`listed`:
   * the task list and webhook events; `url` items stay), or not at all
   * (`none`: the submit answer, which needs neither the images nor the
   * submission echoed back).
   */
  data: "full" | "listed" | "none";
  /**
   * With `data: "listed"` (the task list only): each image and partial image
   * of a `b64_json` task carries `thumbnail_url`, the service's own signed
   * link to it, in place of the payload the list leaves out.
   */
  thumbnails?: boolean;
}

/** A task whose record outlived its bytes by a moment: the same 404 as an expired one. */
export function imageGone(taskId: string): ServiceError {
  return new ServiceError("task_not_found", `No task found with id '${taskId}'.`, {
    param: "task_id",
  });
}

/**
 * The client's view of a task: its prompt and parameters, images as links or
 * base64, as the task asked, and nothing internal (owner, `user`, webhook,
 * attempts). Base64 payloads are {@link PendingImage}s, read when the answer
 * is sent.
 */
export async function presentTask(record: TaskRecord, deps: PresentDeps): Promise<TaskView> {
  const view: TaskView = {
    id: record.id,
    object: "image.task",
    status: record.status,
    created: record.created,
    model: record.model,
  };
  if (deps.data !== "none") {
    view.kind = record.kind === "edit" ? "edit" : "generation";
    if (typeof record.request.prompt === "string") view.prompt = record.request.prompt;
    view.parameters = presentParameters(record);
  }
  if (record.started_at !== undefined) view.started_at = record.started_at;
  if (record.completed_at !== undefined) view.completed_at = record.completed_at;
  if (record.expires_at !== undefined) view.expires_at = record.expires_at;
  if (record.error) view.error = record.error;
  if (record.status === "completed" && deps.data !== "none") {
    view.data = await Promise.all(
      (record.images ?? []).map(async (image, index): Promise<TaskViewImage> => {
        const extra =
          image.revised_prompt === undefined ? {} : { revised_prompt: image.revised_prompt };
        if (record.responseFormat === "url") {
          return {
            url: await deps.images.link(record, index, deps.baseUrl, deps.links),
            ...extra,
          };
        }
        if (deps.data === "listed") {
          if (!deps.thumbnails) return extra;
          const thumbnail = await deps.images.link(record, index, deps.baseUrl, "service");
          return { thumbnail_url: thumbnail, ...extra };
        }
        const pending = new PendingImage(image.bytes, (signal) =>
          deps.images.open(record, index, signal),
        );
        return { b64_json: pending, ...extra };
      }),
    );
  }
  if (record.status === "in_progress" && record.partials?.length && deps.data !== "none") {
    const partials = await presentPartials(record, deps);
    if (partials.length > 0) view.partial_images = partials;
  }
  if (record.usage !== undefined) view.usage = record.usage as TaskUsage;
  return view;
}

/** The submitted parameters the record keeps, each only when it was given. */
function presentParameters(record: TaskRecord): TaskParameters {
  const { request } = record;
  const shown: Record<string, unknown> = {};
  for (const name of SHOWN_TEXT) {
    if (typeof request[name] === "string") shown[name] = request[name];
  }
  for (const name of SHOWN_NUMBERS) {
    if (typeof request[name] === "number") shown[name] = request[name];
  }
  if (record.partialImages) shown.partial_images = record.partialImages;
  return { ...shown, response_format: record.responseFormat } as TaskParameters;
}

/**
 * A running task's partial images: links, or base64 read when sent (in a
 * list, none, or signed links as thumbnails).
 */
async function presentPartials(record: TaskRecord, deps: PresentDeps): Promise<TaskViewPartial[]> {
  if (record.responseFormat === "url") {
    return Promise.all(
      (record.partials ?? []).map(async (_, index) => ({
        index,
        url: await deps.images.partialLink(record, index, deps.baseUrl, deps.links),
      })),
    );
  }
  if (deps.data === "listed") {
    if (!deps.thumbnails) return [];
    return Promise.all(
      (record.partials ?? []).map(async (_, index) => ({
        index,
        thumbnail_url: await deps.images.partialLink(record, index, deps.baseUrl, "service"),
      })),
    );
  }
  return (record.partials ?? []).map((image, index) => ({
    index,
    b64_json: new PendingImage(image.bytes, (signal) =>
      deps.images.openPartial(record, index, signal),
    ),
  }));
}
