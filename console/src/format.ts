import type { Task, TaskImage, TaskStatus, TaskUsage } from "./task-types.js";

const STATUS_LABELS: Record<TaskStatus, string> = {
  queued: "Queued",
  in_progress: "In progress",
  completed: "Completed",
  failed: "Failed",
};

/** A status as people read it; a cancelled task is `failed` with code `cancelled`. */
export function statusLabel(task: Pick<Task, "status" | "error">): string {
  if (task.status === "failed" && task.error?.code === "cancelled") return "Cancelled";
  return STATUS_LABELS[task.status] ?? task.status;
}

/** The tone of a task's badge: a cancelled task is not an error. */
export function statusTone(task: Pick<Task, "status" | "error">): string {
  return task.status === "failed" && task.error?.code === "cancelled" ? "cancelled" : task.status;
}

/** `42 s`, `3 min 5 s`, `1 h 2 min`. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ""}`;
  const minutes = Math.floor((s % 3600) / 60);
  return `${Math.floor(s / 3600)} h${minutes ? ` ${minutes} min` : ""}`;
}

/** Unix seconds as a local date and time, e.g. `12 May 2026, 14:03:27`. */
export function formatTime(unixSec: number, locale?: string, timeZone?: string): string {
  return new Intl.DateTimeFormat(locale, {
    dateStyle: "medium",
    timeStyle: "medium",
    ...(timeZone ? { timeZone } : {}),
  }).format(new Date(unixSec * 1000));
}

/** Names of the parameters, in the order the form shows them. */
const PARAMETER_LABELS: Array<[keyof NonNullable<Task["parameters"]>, string]> = [
  ["size", "Size"],
  ["quality", "Quality"],
  ["n", "Images"],
  ["background", "Background"],
  ["output_format", "Output format"],
  ["output_compression", "Compression"],
  ["moderation", "Moderation"],
  ["input_fidelity", "Input fidelity"],
  ["partial_images", "Partial images"],
  ["response_format", "Response format"],
];

/** The rows of a task's details: what made it, with which parameters, and when. */
export function detailRows(
  task: Task,
  locale?: string,
  timeZone?: string,
): Array<[string, string]> {
  const rows: Array<[string, string]> = [
    ["Kind", task.kind === "edit" ? "Edit" : "Generation"],
    ["Model", task.model],
  ];
  for (const [name, label] of PARAMETER_LABELS) {
    const value = task.parameters?.[name];
    if (value !== undefined) rows.push([label, String(value)]);
  }
  const time = (unix: number) => formatTime(unix, locale, timeZone);
  rows.push(["Created", time(task.created)]);
  if (task.started_at !== undefined) {
    rows.push([
      "Started",
      `${time(task.started_at)} (waited ${formatDuration(task.started_at - task.created)})`,
    ]);
  }
  if (task.completed_at !== undefined) {
    const from = task.started_at ?? task.created;
    rows.push([
      "Finished",
      `${time(task.completed_at)} (took ${formatDuration(task.completed_at - from)})`,
    ]);
  }
  if (task.expires_at !== undefined) rows.push(["Kept until", time(task.expires_at)]);
  return [...rows, ...usageRows(task.usage, locale)];
}

const USAGE_LABELS: Array<[keyof TaskUsage, string]> = [
  ["input_tokens", "Input tokens"],
  ["output_tokens", "Output tokens"],
  ["total_tokens", "Total tokens"],
];

/** A task's token counts (`usage`), each where the channel gave it: `1,290`. */
export function usageRows(usage: TaskUsage | undefined, locale?: string): Array<[string, string]> {
  const numbers = new Intl.NumberFormat(locale);
  return USAGE_LABELS.flatMap(([name, label]): Array<[string, string]> => {
    const value = usage?.[name];
    return typeof value === "number" && Number.isFinite(value)
      ? [[label, numbers.format(value)]]
      : [];
  });
}

/** The size a task asked for: `1024x1536`, or `auto` when it left it to the model. */
export function askedSize(task: Pick<Task, "parameters">): string {
  return task.parameters?.size ?? "auto";
}

/**
 * A card's count of a task's images: `2 images` as asked (`n`), and for a completed task with
 * fewer (the channel made fewer, or one could not be had) what it has, `1 of 2 images`; empty
 * for one image.
 */
export function imageCount(task: Pick<Task, "status" | "parameters" | "data">): string {
  const asked = task.parameters?.n ?? task.data?.length ?? 1;
  const made = task.status === "completed" ? task.data?.length : undefined;
  if (made !== undefined && made < asked) return `${made} of ${asked} images`;
  return asked > 1 ? `${asked} images` : "";
}

/** An image's width and height as people read them: `1024 × 1536 px`. */
export function pixelSize(width: number, height: number): string {
  return `${width} × ${height} px`;
}

/** What a gallery card shows of a task. */
export interface CardPicture {
  /** Its `<img src>`: the first image, or a running task's latest partial image. */
  source?: string;
  /** The final image (not a partial one): its pixel size is the result's. */
  final: boolean;
  /**
   * A finished `b64_json` task whose list item carries neither a link nor a
   * thumbnail link: only the task itself (`GET`) has the image.
   */
  needsTask: boolean;
}

/** A card's picture: `url`, else the list's signed `thumbnail_url`, else base64. */
export function cardPicture(task: Task): CardPicture {
  const of = (image: TaskImage | undefined) =>
    image && (image.url ?? image.thumbnail_url ?? imageSource(image));
  if (task.status === "completed") {
    const source = of(task.data?.[0]);
    if (source) return { source, final: true, needsTask: false };
    const b64 = task.parameters?.response_format !== "url" && (task.data?.length ?? 0) > 0;
    return { final: true, needsTask: b64 };
  }
  const source = task.status === "in_progress" ? of(task.partial_images?.at(-1)) : undefined;
  return { ...(source ? { source } : {}), final: false, needsTask: false };
}

/** The image types the service stores, by the first bytes of their base64. */
const B64_SIGNATURES: Array<[string, string]> = [
  ["iVBORw0KGgo", "image/png"],
  ["/9j/", "image/jpeg"],
  ["UklGR", "image/webp"],
];

/**
 * What an `<img src>` takes for an image: its link, or its base64 as a
 * `data:` URL of the type its bytes start with. Undefined when the item has
 * neither (a `b64_json` task in a list).
 */
export function imageSource(image: TaskImage): string | undefined {
  if (image.url) return image.url;
  if (!image.b64_json) return undefined;
  const type = B64_SIGNATURES.find(([start]) => image.b64_json!.startsWith(start))?.[1];
  return `data:${type ?? "image/png"};base64,${image.b64_json}`;
}

/** A file name for downloading image `index` of a task: `task_…-1.png`. */
export function downloadName(
  task: Pick<Task, "id" | "parameters">,
  index: number,
  source: string,
): string {
  const fromData = /^data:image\/(png|jpeg|webp);/.exec(source)?.[1];
  const fromUrl = /\.(png|jpe?g|webp)(?:[?#]|$)/.exec(source)?.[1];
  const ext = (fromData ?? fromUrl ?? task.parameters?.output_format ?? "png").replace(
    "jpeg",
    "jpg",
  );
  return `${task.id}-${index + 1}.${ext}`;
}
