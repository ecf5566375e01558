import { CredentialSealError, type CredentialSealer } from "../../auth/credential-sealer.js";
import type { EditFile } from "./generate-images.js";
import type { TaskImages } from "../images/task-images.js";
import { TaskFailure } from "../core/task-failure.js";
import type { TaskRecord } from "../core/task-record.js";

/**
 * The forward key a task was submitted with, if any. A task whose key cannot
 * be opened fails: running it on the channel's own key would bill the
 * operator for someone else's task.
 */
export async function openCredential(
  sealer: CredentialSealer | undefined,
  record: TaskRecord,
): Promise<string | undefined> {
  if (record.sealedCredential === undefined) return undefined;
  const unavailable = (why: string) =>
    new TaskFailure(
      "credential_unavailable",
      `The key this task was submitted with cannot be used: ${why}.`,
      "invalid_request_error",
    );
  if (!sealer) throw unavailable("forward mode is off");
  try {
    return await sealer.unseal(record.sealedCredential, record.id);
  } catch (err) {
    if (err instanceof CredentialSealError) throw unavailable("it was sealed with another secret");
    throw err; // the store holding a generated secret is away: the queue runs the task again
  }
}

/**
 * An edit's images from the image store; undefined for a generation. A store
 * that cannot be read rejects (the queue runs the task again later); an image
 * no longer stored comes back empty, and {@link assertEditFilesKept} fails the task.
 */
export async function readEditFiles(
  images: Pick<TaskImages, "readInputs">,
  started: TaskRecord,
): Promise<EditFile[] | undefined> {
  if (started.kind !== "edit") return undefined;
  const inputs = started.inputs ?? [];
  const bytes = await images.readInputs(started);
  return inputs.map((input, index) => ({
    field: input.field,
    mime: input.mime,
    bytes: bytes[index] ?? Buffer.alloc(0),
  }));
}

/** Fails the run of an edit whose images expired before it started. */
export function assertEditFilesKept(files: readonly EditFile[] | undefined): void {
  if (files?.some((file) => file.bytes.length === 0)) {
    throw new TaskFailure(
      "invalid_request",
      "The task's input images are no longer stored (it waited longer than they are kept).",
      "invalid_request_error",
    );
  }
}
