import type { Lane, LaneMatch } from "../http/lane.js";
import { callerOf } from "../http/lane.js";
import type { Passthrough } from "./create-passthrough-handler.js";
import {
  matchPassthroughRoute,
  type PassthroughRoute,
  type RouteMatch,
} from "./passthrough-routes.js";

/**
 * The passthrough's lane: every OpenAI route that names a model
 * (`passthrough-routes.ts`), behind bearer auth, answered by the passthrough.
 * Its routes are matched by a table lookup on the exact path: this is the
 * path that must cost little more than a bare pipe.
 */
export function createProxyLane(passthrough: Passthrough): Lane {
  const laneMatch = (match: RouteMatch): LaneMatch => ({
    template: match.route.template,
    auth: true,
    serve: (call) =>
      passthrough(match, call.req, call.res, callerOf(call), call.fail, call.context),
  });
  // A route without an id in its path matches the same every time: made once, not per request.
  const fixed = new Map<PassthroughRoute, LaneMatch>();
  return {
    match(method, path) {
      const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
      const match = matchPassthroughRoute(method, trimmed);
      if (!match) return undefined;
      if (match.responseId !== undefined) return laneMatch(match);
      let made = fixed.get(match.route);
      if (!made) {
        made = laneMatch({ route: match.route });
        fixed.set(match.route, made);
      }
      return made;
    },
  };
}
