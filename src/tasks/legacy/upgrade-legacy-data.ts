import type { Logger } from "pino";
import type { ForwardSecretHome } from "../../auth/resolve-forward-secret.js";
import type { Config } from "../../config/config-schema.js";
import type { ImageStore } from "../../images/image-store.js";
import { moveLegacyForwardSecret } from "./legacy-forward-secret.js";
import type { LegacyTaskData } from "./legacy-task-data.js";
import { moveLegacyImages } from "./move-legacy-images.js";

/** Options of {@link upgradeLegacyData}. */
export interface UpgradeLegacyDataOptions {
  /** What the task store holds of earlier releases; undefined for a store that cannot hold any. */
  legacy: LegacyTaskData | undefined;
  /** Where the backend keeps forward mode's secret (`TaskBackend.forwardSecret`), if anywhere. */
  forwardSecret: ForwardSecretHome | undefined;
  imageStore: ImageStore;
  config: Pick<Config, "auth" | "imageTasks">;
  logger: Logger;
}

/**
 * The upgrade step at start-up, before anything else uses the stores: image
 * bytes earlier releases kept in the task store move into the image store
 * (records get their keys), and a forward secret kept in the store moves
 * out. After it, nothing in the service reads a task the old way.
 *
 * It serves upgrades from releases before the image store (and, on SQLite,
 * from the Keyv-table layout, moved when the file opens). Finished tasks of
 * those releases expire `imageTasks.retentionSec` after they finished, so
 * once every deployment has run a release with this step for that long, the
 * whole `tasks/legacy/` folder can go (see the release notes in the docs).
 */
export async function upgradeLegacyData(options: UpgradeLegacyDataOptions): Promise<void> {
  const { legacy, config, logger } = options;
  if (!legacy) return;
  await moveLegacyImages({
    legacy,
    imageStore: options.imageStore,
    limits: config.imageTasks,
    logger,
  });
  if (config.auth.forward) {
    await moveLegacyForwardSecret({
      legacy,
      configured: config.auth.forward.secret,
      home: options.forwardSecret,
      logger,
    });
  }
}
