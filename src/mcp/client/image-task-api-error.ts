/** Why a call to the image-task HTTP API failed, so tools can turn it into a clear message. */
export type ImageTaskApiErrorKind = "http" | "network" | "timeout" | "protocol" | "refused";

/**
 * A failed call to the HTTP API. `message` is written for the person reading the tool result:
 * it names the status and OpenAI error code and says what to do, and never holds a key, a stack
 * or a raw response body.
 */
export class ImageTaskApiError extends Error {
  constructor(
    readonly kind: ImageTaskApiErrorKind,
    message: string,
    readonly status?: number,
    readonly code?: string,
  ) {
    super(message);
    this.name = "ImageTaskApiError";
  }
}
