import { AppError } from "../http/app-error.js";
import { shorten } from "../http/shorten.js";

/** One message for "unknown" and "not yours", so a key cannot probe other groups' models. */
export function modelNotFound(model: string): AppError {
  return new AppError(
    "model_not_found",
    `The model '${shorten(model)}' does not exist or you do not have access to it.`,
    { param: "model" },
  );
}
