import { dirname, resolve } from "node:path";
import { parseRedisTopology, type RedisTopology } from "./schema/redis-topology.js";

export type { RedisNode, RedisTopology } from "./schema/redis-topology.js";

/** Where task records live, as `store.url` says. */
export type TaskStoreDeployment =
  /** `memory://`: this process only, lost on restart. */
  | { kind: "memory" }
  /** `sqlite://PATH`: this process only, kept across restarts. */
  | { kind: "sqlite"; /** Absolute path of the database file. */ file: string }
  /**
   * `redis://`, `redis+sentinel://`, `redis+cluster://` (and their `rediss`
   * forms): shared by every replica; `topology` says which deployment.
   */
  | { kind: "redis"; url: string; topology: RedisTopology };

/** Where image bytes live, as `images.url` (or its default for the task store) says. */
export type ImageStoreDeployment =
  /** `memory://`: this process's memory. */
  | { kind: "memory"; url: string }
  /** `file://DIR`: a directory (absolute), which replicas must share. */
  | { kind: "directory"; url: string; dir: string }
  /** `s3://bucket/prefix`: an S3-compatible bucket. */
  | {
      kind: "s3";
      url: string;
      bucket: string;
      /** No slashes around it; "" for none. */ prefix: string;
    };

/**
 * What kind of deployment a configuration describes, worked out once when it
 * is parsed, so that nothing else reads a URL's scheme.
 */
export interface Deployment {
  taskStore: TaskStoreDeployment;
  images: ImageStoreDeployment;
  /** Several replicas share the task store (and must share the image store). */
  shared: boolean;
  /** Forward mode is on (`auth.forward`). */
  forward: boolean;
}

/** Where a shared deployment keeps images when `images.url` is not set. */
const SHARED_IMAGES_DEFAULT = "file://./data/images";

/**
 * The {@link Deployment} of a validated configuration. Relative paths are
 * resolved against the working directory, as the service opens them.
 */
export function describeDeployment(config: {
  store: { url: string };
  images: { url?: string | undefined };
  auth: { forward?: unknown };
}): Deployment {
  const { taskStore, shared, imagesBeside } = taskStoreOf(config.store.url);
  return {
    taskStore,
    images: imageStoreOf(config.images.url ?? imagesBeside),
    shared,
    forward: config.auth.forward !== undefined,
  };
}

/**
 * What `store.url` names, whether replicas share it, and the image store
 * beside it when `images.url` is unset: memory beside memory, a directory
 * beside the SQLite file, `./data/images` beside Redis (which every replica
 * must then mount).
 */
function taskStoreOf(url: string): {
  taskStore: TaskStoreDeployment;
  shared: boolean;
  imagesBeside: string;
} {
  if (url.startsWith("memory://")) {
    return { taskStore: { kind: "memory" }, shared: false, imagesBeside: "memory://" };
  }
  if (url.startsWith("sqlite://")) {
    const file = resolve(url.slice(9));
    return {
      taskStore: { kind: "sqlite", file },
      shared: false,
      imagesBeside: `file://${resolve(dirname(file), "images")}`,
    };
  }
  // The schema admits nothing else, and checked the URL's form.
  const topology = parseRedisTopology(url);
  if (typeof topology === "string") throw new Error(`store.url: ${topology}`);
  return {
    taskStore: { kind: "redis", url, topology },
    shared: true,
    imagesBeside: SHARED_IMAGES_DEFAULT,
  };
}

function imageStoreOf(url: string): ImageStoreDeployment {
  if (url === "memory://") return { kind: "memory", url };
  if (url.startsWith("file://")) return { kind: "directory", url, dir: resolve(url.slice(7)) };
  return { kind: "s3", url, ...parseS3Url(url) };
}

/** `s3://bucket/some/prefix` as bucket and prefix (no slashes around it). */
export function parseS3Url(url: string): { bucket: string; prefix: string } {
  const rest = url.slice("s3://".length);
  const slash = rest.indexOf("/");
  if (slash === -1) return { bucket: rest, prefix: "" };
  return { bucket: rest.slice(0, slash), prefix: rest.slice(slash + 1).replace(/^\/+|\/+$/g, "") };
}
