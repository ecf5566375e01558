import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Lane, LaneMatch } from "../http/lane.js";
import type { Config } from "../config/config-schema.js";
import {
  defaultConsoleAssetsDir,
  loadConsoleAssets,
  type ConsoleAsset,
  type ConsoleAssets,
} from "./console-assets.js";
import { ServiceError } from "../errors/service-error.js";
import { consoleContentSecurityPolicy, consoleSecurityHeaders } from "./console-headers.js";

/** Dependencies of {@link createConsoleLane}. */
export interface ConsoleLaneDeps {
  config: Pick<Config, "console" | "server" | "images" | "deployment">;
  logger: Logger;
  /** The built console. Default: `dist/console-ui/` of this package ({@link defaultConsoleAssetsDir}). */
  assetsDir?: string;
}

const PREFIX = "/console/";

/**
 * The web console: `GET /console/` and its files, static, with a strict
 * Content-Security-Policy and the other security headers; `/console`
 * redirects to `/console/`. Anything else below it (an unknown file, `..`,
 * a directory) falls through to the 404 `not_found` envelope, as does all of
 * it with `console.enabled: false`. The page talks to the public API with
 * the user's own key: it adds no route of its own. Files are read on the
 * first request (not at start-up, not on import) and kept in memory.
 */
export function createConsoleLane(deps: ConsoleLaneDeps): Lane {
  if (!deps.config.console.enabled) return { match: () => undefined };
  const headers = consoleSecurityHeaders(consoleContentSecurityPolicy(deps.config));
  const dir = deps.assetsDir ?? defaultConsoleAssetsDir();
  let loading: Promise<ConsoleAssets | undefined> | undefined;
  const assets = () =>
    (loading ??= loadConsoleAssets(dir).catch((err: unknown) => {
      deps.logger.error(
        { err, dir },
        "the web console's files are missing: run `npm run build`; /console/ answers 404",
      );
      return undefined;
    }));
  const redirect: LaneMatch = {
    template: "/console",
    auth: false,
    // Relative, so that it also holds behind a proxy that serves the service under a prefix.
    serve: ({ res }) => void res.writeHead(301, { Location: "console/" }).end(),
  };
  return {
    match(method, path) {
      if (method !== "GET" && method !== "HEAD") return undefined;
      if (path === "/console") return redirect;
      if (!path.startsWith(PREFIX)) return undefined;
      // The raw path, not decoded: only the exact names of the console's files are found.
      const name = path.slice(PREFIX.length) || "index.html";
      return {
        template: "/console/{*asset}",
        auth: false,
        async serve({ req, res, fail }) {
          const asset = (await assets())?.get(name);
          if (!asset) {
            fail(new ServiceError("not_found", "Unknown route: no console file has this name."));
            return;
          }
          sendAsset(req, res, asset, headers);
        },
      };
    },
  };
}

/**
 * One file: gzip when the client takes it, `304` for a matching
 * `If-None-Match`. `no-cache`: the names carry no version, so a browser
 * checks each time (a `304` costs no body) and never runs a stale script
 * after an upgrade.
 */
function sendAsset(
  req: IncomingMessage,
  res: ServerResponse,
  asset: ConsoleAsset,
  headers: Record<string, string>,
): void {
  const gzip = asset.gzip && acceptsGzip(req.headers["accept-encoding"]) ? asset.gzip : undefined;
  const etag = gzip ? asset.gzipEtag : asset.etag;
  const common = {
    ...headers,
    "Content-Type": asset.contentType,
    "Cache-Control": "no-cache",
    ETag: etag,
    Vary: "Accept-Encoding",
  };
  if (matches(req.headers["if-none-match"], etag)) {
    res.writeHead(304, common).end();
    return;
  }
  const body = gzip ?? asset.body;
  res.writeHead(200, {
    ...common,
    ...(gzip ? { "Content-Encoding": "gzip" } : {}),
    "Content-Length": String(body.length),
  });
  res.end(body);
}

/** Whether `Accept-Encoding` takes gzip (and does not refuse it with `q=0`). */
function acceptsGzip(header: string | undefined): boolean {
  if (!header) return false;
  return header.split(",").some((part) => {
    const [coding, ...params] = part.trim().toLowerCase().split(";");
    if (coding !== "gzip") return false;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(",").some((tag) => ["*", etag, `W/${etag}`].includes(tag.trim()));
}
