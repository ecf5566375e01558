import type { Logger } from "pino";
import type { ImageFileSink } from "../sink/image-file-sink.js";
import type { ImageTaskApiClient } from "../client/image-task-api-client.js";

/**
 * How finished images reach the user: saved into a local directory (stdio, the MCP client runs
 * on the user's machine) or handed out as links to the signed URLs (Streamable HTTP, where the
 * client's disk is out of reach).
 */
export type ImageDelivery =
  | { kind: "files"; sink: ImageFileSink }
  | {
      kind: "links";
      /**
       * The origin the MCP client reached the service at. The tools call the API over loopback,
       * so without `server.publicBaseUrl` the service signs URLs on the loopback origin; those
       * (and only those) are moved to this origin. The signature covers only path and expiry.
       */
      publicOrigin?: string;
    };

/** Everything the three tools depend on, passed in explicitly. */
export interface ImageToolDeps {
  api: ImageTaskApiClient;
  delivery: ImageDelivery;
  defaultModel: string;
  /** Pause before asking again when the service answered a wait early (an older service). */
  pollIntervalMs: number;
  maxPollIntervalMs: number;
  /** How often `check_image_task` sends a progress notification while it waits. */
  progressIntervalMs: number;
  /** More images than this in one task are refused, nothing saved. */
  maxImagesPerTask: number;
  /** Largest decoded `b64_json` image saved. */
  maxImageBytes: number;
  logger: Logger | undefined;
}
