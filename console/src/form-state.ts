import type { KeyStorage } from "./key-store.js";
import type { TaskFormInput } from "./task-form.js";
import { TASK_ID, type Task, type TaskParameters } from "./task-types.js";

/** The form's fields without its files (which are neither kept with a task nor in storage). */
export type FormFields = Omit<TaskFormInput, "images" | "mask">;

/** The form's fields that are one control each ("mode" is two radios), named as the control. */
export const ONE_CONTROL_FIELDS = [
  "model",
  "prompt",
  "size",
  "quality",
  "n",
  "background",
  "outputFormat",
  "outputCompression",
  "moderation",
  "style",
  "partialImages",
  "responseFormat",
  "inputFidelity",
  "user",
  "webhookUrl",
] as const satisfies ReadonlyArray<keyof FormFields>;

const FIELD_NAMES: ReadonlyArray<keyof FormFields> = ["mode", ...ONE_CONTROL_FIELDS];

/**
 * The form as a task was submitted ("Use these settings"): its prompt,
 * model and every parameter the task keeps; what it does not keep (`style`,
 * `user`, `webhook_url`, an edit's images) is left empty.
 */
export function formFromTask(task: Task): FormFields {
  const p: Partial<TaskParameters> = task.parameters ?? {};
  const text = (value: string | number | undefined) => (value === undefined ? "" : String(value));
  return {
    mode: task.kind === "edit" ? "edit" : "generate",
    model: task.model,
    prompt: task.prompt ?? "",
    size: text(p.size),
    quality: text(p.quality),
    n: text(p.n ?? 1),
    background: text(p.background),
    outputFormat: text(p.output_format),
    outputCompression: text(p.output_compression),
    moderation: text(p.moderation),
    style: "",
    partialImages: text(p.partial_images ?? 0),
    responseFormat: p.response_format ?? "b64_json",
    inputFidelity: text(p.input_fidelity),
    user: "",
    webhookUrl: "",
  };
}

const FORM = "image-task-sidecar.form";
const LIVE = "image-task-sidecar.live-task";

/**
 * What the create page keeps in `sessionStorage` (this tab only, like the
 * key), so that a reload keeps the form and goes on watching the task just
 * submitted. Signing out forgets both.
 */
export function createSessionState(storage: KeyStorage) {
  const read = (name: string): string | undefined => {
    try {
      return storage.getItem(name) ?? undefined;
    } catch {
      return undefined;
    }
  };
  const write = (name: string, value: string | undefined): void => {
    try {
      if (value === undefined) storage.removeItem(name);
      else storage.setItem(name, value);
    } catch {
      // storage refused (a privacy mode): a reload starts afresh
    }
  };
  return {
    form(): Partial<FormFields> | undefined {
      return parseForm(read(FORM));
    },
    saveForm(fields: FormFields | undefined): void {
      write(FORM, fields && JSON.stringify(fields));
    },
    liveTask(): string | undefined {
      const id = read(LIVE);
      return id !== undefined && TASK_ID.test(id) ? id : undefined;
    },
    saveLiveTask(id: string | undefined): void {
      write(LIVE, id);
    },
    clear(): void {
      write(FORM, undefined);
      write(LIVE, undefined);
    },
  };
}

/** Kept fields: text only, known names only; anything else is dropped. */
export function parseForm(text: string | undefined): Partial<FormFields> | undefined {
  if (!text) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!value || typeof value !== "object") return undefined;
  const fields: Record<string, string> = {};
  for (const name of FIELD_NAMES) {
    const field = (value as Record<string, unknown>)[name];
    if (typeof field === "string") fields[name] = field;
  }
  if (fields.mode !== undefined && fields.mode !== "generate" && fields.mode !== "edit") {
    delete fields.mode;
  }
  return fields as Partial<FormFields>;
}
