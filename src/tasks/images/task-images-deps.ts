import type { Logger } from "pino";
import type { ImagesConfig } from "../../config/schema/images-schema.js";
import type { ImageUrlSigner } from "./image-url-signer.js";
import type { ImageStore } from "../../images/image-store.js";

/** Dependencies of `createTaskImages`. */
export interface TaskImagesDeps {
  imageStore: ImageStore;
  signer: ImageUrlSigner;
  config: Pick<ImagesConfig, "links" | "publicBaseUrl">;
  logger: Logger;
  now: () => number;
  /**
   * The longest from a task's start to its expiry (`timeoutSec` +
   * `retentionSec`): how long a running task's partial image links last.
   */
  runLimitSec: number;
}

/** What every step on a task's images reads: the stores, the signer, the clock. */
export type TaskImagesState = Omit<TaskImagesDeps, "logger">;
