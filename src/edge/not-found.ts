import { ServiceError } from "../errors/service-error.js";
import type { LaneMatch } from "../http/lane.js";

/** What the edge answers when no lane has the route: 404 `not_found`, behind auth under `/v1`. */
const BEHIND_AUTH: LaneMatch = {
  template: "unmatched",
  auth: true,
  serve: () => {
    throw unknownRoute();
  },
};
const OPEN: LaneMatch = { ...BEHIND_AUTH, auth: false };

/**
 * The answer to a route no lane serves. Under `/v1` the caller is
 * authenticated first, as on every API route, so a request without a key
 * learns nothing of which routes exist; elsewhere it is the 404 at once.
 */
export function notFoundMatch(path: string): LaneMatch {
  const prefix = path.slice(0, 4).toLowerCase();
  return prefix === "/v1" || prefix === "/v1/" ? BEHIND_AUTH : OPEN;
}

/** The message names no part of the path: a client's bytes are never echoed back. */
function unknownRoute(): ServiceError {
  return new ServiceError(
    "not_found",
    "Unknown route: no route of this service answers this method and path.",
  );
}
