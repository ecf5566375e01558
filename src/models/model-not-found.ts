import { ServiceError } from "../errors/service-error.js";
import { shorten } from "../errors/shorten.js";

/** One message for "unknown" and "not yours", so a key cannot probe other groups' models. */
export function modelNotFound(model: string): ServiceError {
  return new ServiceError(
    "model_not_found",
    `The model '${shorten(model)}' does not exist or you do not have access to it.`,
    { param: "model" },
  );
}
