import { z } from "zod";
import { fromText, portNumber, positiveInt, url } from "./field-types.js";

/** The HTTP listener. */
export const serverSchema = z
  .object({
    /** Port to listen on. Default 8080; `PORT` overrides it; 0 picks a free port. */
    port: portNumber.default(8080),
    /**
     * Interface to bind. Default `0.0.0.0` (all), as a container or ingress
     * backend needs; the embedded demo configuration binds `127.0.0.1`
     * (`HOST` there), since its demo key reaches every model.
     */
    host: z.string().min(1).default("0.0.0.0"),
    /**
     * Base of the URLs the service hands out (task `Location`, signed image
     * URLs). Default: derived from each request's Host (and, with
     * `trustProxy`, `X-Forwarded-Proto`/`-Host`).
     */
    publicBaseUrl: url.optional(),
    /** Trust `X-Forwarded-*` headers from an ingress or CDN. Default false. */
    trustProxy: fromText(z.boolean({ error: "must be true or false" })).default(false),
    /**
     * Largest JSON request body, in bytes, on routes whose bodies can be big
     * (chat with images, responses, embeddings). Routes that take a prompt
     * and a few fields (image tasks, image generations, speech) accept
     * 1 MiB, or this if lower. Default 20 MiB (OpenAI's own cap for chat).
     */
    maxBodyBytes: positiveInt("bytes").default(20 * 1024 * 1024),
    /**
     * Largest upload, in bytes: a `multipart/form-data` body (image edits and
     * variations, audio; edit tasks), or an edit task's JSON with `data:` URLs.
     * Default 64 MiB.
     */
    maxUploadBytes: positiveInt("bytes").default(64 * 1024 * 1024),
    /**
     * Seconds an authenticated request's body may take to arrive, apart from
     * the time its answer takes (the server itself has no request timeout,
     * for the long synchronous image route). Default 300, Node's own default.
     */
    bodyTimeoutSec: positiveInt("seconds").default(300),
    /**
     * Seconds a request body may send nothing while the service waits for the
     * rest (a client that sent headers and half a body, then went silent: a
     * slowloris), whatever `bodyTimeoutSec` still allows a slow but moving
     * upload. Default 60, as nginx's `client_body_timeout`.
     */
    bodyIdleSec: positiveInt("seconds").default(60),
    /**
     * Largest non-streamed JSON answer read from a channel, in bytes (it is
     * read whole, to pass on only complete JSON). Default 128 MiB.
     */
    maxResponseBytes: positiveInt("bytes").default(128 * 1024 * 1024),
    /**
     * Secret that signs image URLs. Default: a random one kept in the store,
     * so URLs survive restarts and are valid on every replica.
     */
    urlSigningSecret: z.string().min(16, "must be at least 16 characters").optional(),
    /**
     * Client connections open at once; past it a new connection is closed at
     * once (the others are served as usual), so idle or slow connections
     * cannot exhaust the process's file descriptors and memory. Default 10000.
     */
    maxConnections: positiveInt("connections").default(10_000),
    /** Seconds SIGTERM waits for in-flight requests before exiting. Default 25. */
    shutdownGraceSec: positiveInt("seconds").default(25),
  })
  .strict()
  .prefault({});
