import { z } from "zod";
import { fromText, portNumber, positiveInt, url } from "./field-types.js";
import { trustProxyEntryProblem } from "../../net/trusted-proxies.js";

/**
 * `trustProxy`: a boolean, or addresses and CIDRs (a list, or comma-separated
 * text as a `${VAR}` gives it).
 */
const trustProxySchema = fromText(
  z.union(
    [
      z.boolean(),
      z.preprocess(
        (value) =>
          typeof value === "string"
            ? value
                .split(",")
                .map((entry) => entry.trim())
                .filter((entry) => entry !== "")
            : value,
        z.array(
          z.string().superRefine((entry, ctx) => {
            const problem = trustProxyEntryProblem(entry);
            if (problem) ctx.addIssue({ code: "custom", message: problem });
          }),
        ),
      ),
    ],
    { error: "must be true, false, or a list of proxy addresses and CIDRs" },
  ),
);

/** One entry of `corsOrigins`: `*`, or an origin (scheme and host, no path). */
const corsOrigin = z.string().superRefine((entry, ctx) => {
  if (entry !== "*" && !/^https?:\/\/[^/?#\s]+$/i.test(entry)) {
    ctx.addIssue({
      code: "custom",
      message: `must be "*" or an origin such as https://app.example.com (scheme and host, no path): ${JSON.stringify(entry.slice(0, 80))}`,
    });
  }
});

/**
 * `corsOrigins`: a list, or comma-separated text (as `${VAR}` gives it; empty
 * text is no origin at all).
 */
const corsOriginsSchema = z.union(
  [
    z.array(corsOrigin),
    z
      .string()
      .transform((text) =>
        text
          .split(",")
          .map((entry) => entry.trim())
          .filter((entry) => entry !== ""),
      )
      .pipe(z.array(corsOrigin)),
  ],
  { error: 'must be a list of origins, or "*"' },
);

/** The HTTP listener. Each field's documentation is its `description`, shown in editors and docs. */
export const serverSchema = z
  .object({
    port: portNumber
      .default(8080)
      .meta({ description: "Port to listen on; 0 picks a free port. `PORT` overrides it." }),
    host: z
      .string()
      .min(1)
      .default("0.0.0.0")
      .meta({
        description:
          "Interface to bind. All interfaces by default, as a container or ingress backend " +
          "needs; the embedded demo configuration binds `127.0.0.1` (`HOST` there), since its " +
          "demo key reaches every model.",
      }),
    publicBaseUrl: url.optional().meta({
      description:
        "Base of the URLs the service hands out (task `Location`, signed image URLs, links in " +
        "MCP results), e.g. `https://images.example.com`. Default: taken from each request's " +
        "`Host` (and, with `trustProxy`, `X-Forwarded-Proto` and `X-Forwarded-Host`). Set it in " +
        "production: it is the only origin a request cannot influence.",
    }),
    trustProxy: trustProxySchema.default(false).meta({
      description:
        "The proxies in front (an ingress, a load balancer, a CDN's edge): `false` (none), " +
        "`true` (loopback and private networks: 127.0.0.0/8, ::1, 10.0.0.0/8, 172.16.0.0/12, " +
        "192.168.0.0/16, 100.64.0.0/10, fc00::/7) or a list of addresses and CIDRs (also as " +
        "comma-separated text, for `${VAR}`). Only a request whose peer is one of them has its " +
        "`X-Forwarded-For` read, from the right, skipping trusted hops (the first untrusted " +
        "entry is the client: for `maxConnectionsPerIp`, forward mode's per-address bound and " +
        "`client_ip`), and its `X-Forwarded-Proto` and `X-Forwarded-Host` honoured when " +
        "building URLs; anyone else's are ignored.",
    }),
    corsOrigins: corsOriginsSchema.default(["*"]).meta({
      description:
        'Web pages that may call the API from a browser (CORS), on `/v1/…` and `/mcp`: `["*"]` ' +
        "(default) pages of any origin, as OpenAI's API, new-api, one-api and LiteLLM allow; a list " +
        "of origins (`https://app.example.com`, also as comma-separated text) only those; `[]` " +
        "none. Safe to open: the API takes its key from the `Authorization` header only and sets " +
        "no cookie, so a page can call it only with a key it already has. Requests without an " +
        "`Origin` header (a server's SDK) get no CORS header.",
    }),
    replicaName: z
      .string({ error: "must be a string" })
      .regex(/^[A-Za-z0-9._:-]{1,128}$/, "must be 1-128 letters, digits or . _ : -")
      .optional()
      .meta({
        description:
          "This process's name in task lines and traces (`replica`), to tell which replica ran a " +
          "task. Default: the host name and process id (`host:pid`); under Kubernetes, the pod name.",
      }),
    maxBodyBytes: positiveInt("bytes")
      .default(20 * 1024 * 1024)
      .meta({
        description:
          "Largest JSON request body, in bytes, on routes whose bodies can be big (chat with " +
          "images, responses, embeddings, completions, moderations, JSON image edits). Routes " +
          "that take a prompt and a few fields (image tasks, image generations, speech) accept " +
          "1 MiB, or this if lower. 20 MiB by default, OpenAI's own cap for chat.",
      }),
    maxUploadBytes: positiveInt("bytes")
      .default(64 * 1024 * 1024)
      .meta({
        description:
          "Largest upload, in bytes: a `multipart/form-data` body (image edits and variations, " +
          "audio transcriptions and translations, edit tasks), or an edit task's JSON with " +
          "`data:` URLs. 64 MiB by default.",
      }),
    bodyTimeoutSec: positiveInt("seconds")
      .default(300)
      .meta({
        description:
          "Seconds a request's body may take to arrive, apart from the time its answer takes " +
          "(the server itself has no request timeout, for the long synchronous image routes). " +
          "Past it: 408 `request_timeout`. The default is Node's own.",
      }),
    bodyIdleSec: positiveInt("seconds")
      .default(60)
      .meta({
        description:
          "Seconds a request body may send nothing while the rest is awaited (a slowloris), " +
          "whatever `bodyTimeoutSec` still allows a slow but moving upload. Past it: 408 " +
          "`request_timeout`. The default is nginx's `client_body_timeout`.",
      }),
    maxResponseBytes: positiveInt("bytes")
      .default(128 * 1024 * 1024)
      .meta({
        description:
          "Largest non-streamed JSON answer read from a channel, in bytes (such an answer is " +
          "read whole, to pass on only complete JSON; a larger one is 502 `invalid_response`). " +
          "128 MiB by default. Streams and binary answers are not capped.",
      }),
    urlSigningSecret: z
      .string()
      .min(16, "must be at least 16 characters")
      .optional()
      .meta({
        description:
          "Secret that signs image URLs (at least 16 characters); set it to rotate. Default: on " +
          "SQLite and memory, a random one generated once and kept in the task store, so URLs " +
          "survive restarts; on a shared store (Redis), one derived from the configuration's other " +
          "secrets, the same on every replica and after Redis lost its data (links then change " +
          "only when a key or secret in the configuration does; set this to keep them through " +
          "rotations).",
      }),
    maxConnections: positiveInt("connections")
      .default(10_000)
      .meta({
        description:
          "Client connections open at once; past it a new connection is closed at once (the " +
          "others are served as usual), so idle or slow connections cannot exhaust the " +
          "process's file descriptors and memory.",
      }),
    maxConnectionsPerIp: positiveInt("connections")
      .default(1000)
      .meta({
        description:
          "Client connections one address may hold open at once (an IPv6 client counts by its " +
          "/64), so one client cannot take every connection; past it its new connection is " +
          "closed at once. With `trustProxy` the connections all come from the proxy, so the " +
          "cap counts instead the requests in flight per address the proxy names (the last " +
          "`X-Forwarded-For` entry), answering 429 `too_many_connections` beyond it. Behind a " +
          "proxy, set `trustProxy`: otherwise every connection counts for the proxy's address.",
      }),
    headersTimeoutSec: positiveInt("seconds")
      .default(30)
      .meta({
        description:
          "Seconds a client has to send a request's headers, from its first byte (or, on a new " +
          "connection, from the connect); past it 408 and the connection is closed.",
      }),
    keepAliveTimeoutSec: positiveInt("seconds")
      .default(5)
      .meta({
        description:
          "Seconds an idle keep-alive connection is kept open for its next request. Behind a " +
          "load balancer that reuses connections, set it above the balancer's own idle timeout " +
          "(AWS ALB: 60), so the service never closes a connection the balancer is reusing.",
      }),
    shutdownGraceSec: positiveInt("seconds")
      .optional()
      .meta({
        description:
          "Seconds SIGTERM gives in-flight requests and running generations: the process " +
          "exits as soon as they are done, and hands back what is still running at the end " +
          "(which then runs again elsewhere). Polls of `channels[].async` jobs are handed to " +
          "another replica at once, not waited for. Default: `imageTasks.timeoutSec` + 30 " +
          "(630 with the defaults), so a generation that started is never cut.",
      }),
  })
  .strict()
  .prefault({})
  .meta({ description: "The HTTP listener." });
