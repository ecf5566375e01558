import type { Logger } from "pino";
import type { ForwardSecretHome } from "../../auth/resolve-forward-secret.js";
import type { LegacyTaskData } from "./legacy-task-data.js";

/** The task store's meta key under which earlier releases kept a generated forward secret. */
export const FORWARD_SECRET_META_KEY = "forward-secret";

/** Options of {@link moveLegacyForwardSecret}. */
export interface MoveLegacyForwardSecretOptions {
  legacy: Pick<LegacyTaskData, "getMeta" | "deleteMeta">;
  /** `auth.forward.secret`. */
  configured: string | undefined;
  /** Where the backend keeps a generated secret (`TaskBackend.forwardSecret`), if anywhere. */
  home: ForwardSecretHome | undefined;
  logger: Logger;
}

/**
 * Earlier releases generated forward mode's secret and kept it in the task
 * store, beside the keys it seals. Such a secret leaves the store: where the
 * backend keeps one elsewhere (SQLite: a file beside the database) and holds
 * none yet, it becomes that one (written and synced before it leaves the
 * store), so the sealed keys of tasks in flight still open and owners stay
 * the same; beside a configured secret or one already kept it is deleted, and
 * if it was another one, the tasks it sealed cannot be opened any more, which
 * is said once in the log.
 */
export async function moveLegacyForwardSecret(
  options: MoveLegacyForwardSecretOptions,
): Promise<void> {
  const { legacy, home, logger } = options;
  const kept = await legacy.getMeta(FORWARD_SECRET_META_KEY);
  if (kept === undefined) return;
  let secret = options.configured;
  if (secret === undefined && home) secret = (await home.read()) ?? (await home.keep(kept));
  await legacy.deleteMeta(FORWARD_SECRET_META_KEY);
  if (secret !== kept) {
    logger.warn(
      "deleted a forward secret an earlier version kept in the task store: unfinished forward " +
        "tasks sealed with it fail credential_unavailable, and tasks from before belong to " +
        "other owners (see docs/forward-mode.md, the forward secret)",
    );
  }
}
