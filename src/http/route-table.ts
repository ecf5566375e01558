/** The methods the service's routes answer; `HEAD` is served as `GET`. */
export type RouteMethod = "GET" | "POST" | "DELETE";

/** One route of a lane's table. */
export interface RouteDef {
  method: RouteMethod;
  /**
   * `/v1/images/tasks/:taskId`: literal segments, `:name` for one non-empty
   * segment, a last `*name` for the rest of the path (one segment or more).
   */
  template: string;
}

/** A path matched to a route of the table, with the values of its `:` and `*` segments. */
export interface RouteHit<R extends RouteDef> {
  route: R;
  /** The `:name` and `*name` segments as sent (still percent-encoded), in template order. */
  params: string[];
}

interface Compiled<R extends RouteDef> {
  route: R;
  verb: RouteMethod;
  /** Lower-case literals; `:` one segment, `*` the rest. */
  segments: string[];
}

/**
 * A matcher over a lane's routes, as the routers clients know match them:
 * literal segments in any letter case, one trailing `/` allowed, `HEAD` as
 * `GET`. Returns undefined for any other path or method (the edge then asks
 * the next lane, and answers 404 when none takes it).
 */
export function createRouteTable<R extends RouteDef>(
  routes: readonly R[],
): (method: string, path: string) => RouteHit<R> | undefined {
  const compiled: Array<Compiled<R>> = routes.map((route) => ({
    route,
    verb: route.method,
    segments: route.template
      .split("/")
      .slice(1)
      .map((part) =>
        part.startsWith(":") ? ":" : part.startsWith("*") ? "*" : part.toLowerCase(),
      ),
  }));
  return (method, path) => {
    const verb = method === "HEAD" ? "GET" : method;
    const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
    const parts = trimmed.split("/").slice(1);
    for (const candidate of compiled) {
      if (candidate.verb !== verb) continue;
      const params = fit(candidate.segments, parts);
      if (params) return { route: candidate.route, params };
    }
    return undefined;
  };
}

/** The params of `parts` under `segments`, or undefined when they do not fit. */
function fit(segments: readonly string[], parts: readonly string[]): string[] | undefined {
  const rest = segments.at(-1) === "*";
  if (rest ? parts.length < segments.length : parts.length !== segments.length) return undefined;
  const params: string[] = [];
  for (let index = 0; index < segments.length; index += 1) {
    const segment = segments[index] as string;
    const part = parts[index] as string;
    if (segment === "*") {
      const tail = parts.slice(index).join("/");
      if (tail === "") return undefined;
      params.push(tail);
      return params;
    }
    if (segment === ":") {
      if (part === "") return undefined;
      params.push(part);
    } else if (part.length !== segment.length || part.toLowerCase() !== segment) {
      return undefined;
    }
  }
  return params;
}

/** A path segment, percent-decoded; undefined for a broken escape (the client's error). */
export function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
