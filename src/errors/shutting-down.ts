import { ServiceError } from "./service-error.js";

/** A submission refused while the replica drains: another replica (or this one, later) takes it. */
export function shuttingDown(): ServiceError {
  return new ServiceError("service_unavailable", "The service is shutting down; retry shortly.", {
    retryAfter: 2,
  });
}
