import type { Logger } from "pino";
import { createChannelClient } from "../channels/channel-client.js";
import { checkChannel } from "../channels/check-channel.js";
import { ConfigError } from "../config/config-error.js";
import type { Config } from "../config/config-schema.js";
import { startConfiguredChannels } from "../channels/start-configured-channels.js";
import {
  describeImageCheck,
  describeImageStore,
  openImageStore,
} from "../images/open-image-store.js";
import { createMetrics } from "../metrics/create-metrics.js";
import { probeTaskBackend } from "../tasks/open-task-backend.js";

/** One check `check-config --probe` made. */
export interface ProbeResult {
  ok: boolean;
  /** One line: what was checked and what it found, naming the field when it failed. */
  line: string;
}

/**
 * What `image-task-sidecar check-config --probe` checks without starting the
 * service: the same checks start-up makes. Each channel's model list (a 404
 * says to look at `/v1`), the task store, and the image store (S3:
 * `HeadBucket` and a small object written, read and deleted; a directory: a
 * file written and removed), waiting for each as long as start-up would.
 * Never throws; one result per check, in that order.
 */
export async function probeConfig(config: Config, logger: Logger): Promise<ProbeResult[]> {
  const results = await probeChannels(config, logger);
  results.push(await probeStore(config, logger));
  results.push(await probeImages(config, logger));
  return results;
}

async function probeChannels(config: Config, logger: Logger): Promise<ProbeResult[]> {
  const metrics = createMetrics({ defaultMetrics: false });
  const { channels, close } = await startConfiguredChannels(config.channels);
  const client = createChannelClient({ metrics, logger });
  try {
    const checks = await Promise.all(
      channels.map((channel, index) => checkChannel(client, channel, index)),
    );
    return checks.map((check) => {
      const what = `channels[${check.index}] "${check.name}"`;
      if (check.problem) return { ok: false, line: `${check.problem} (channel "${check.name}")` };
      if (check.missing) {
        const models = check.missing.join(", ");
        const verb = check.missing.length === 1 ? "is" : "are";
        return {
          ok: false,
          line: `channels[${check.index}].models: ${models} ${verb} not in the channel's model list (channel "${check.name}")`,
        };
      }
      const demo = config.channels[check.index]?.type === "demo" ? " (the built-in demo)" : "";
      const keyless =
        check.answered === 401 || check.answered === 403
          ? " (it has no key of its own: users' keys are checked there)"
          : " with a model list";
      return {
        ok: true,
        line: `${what}${demo}: GET /models answered ${check.answered}${keyless}`,
      };
    });
  } finally {
    await client.close();
    await close();
  }
}

async function probeStore(config: Config, logger: Logger): Promise<ProbeResult> {
  try {
    return { ok: true, line: `store.url: ${await probeTaskBackend(config, logger)}` };
  } catch (err) {
    return { ok: false, line: (err as Error).message };
  }
}

async function probeImages(config: Config, logger: Logger): Promise<ProbeResult> {
  const where = describeImageStore(config);
  try {
    const metrics = createMetrics({ defaultMetrics: false });
    const store = await openImageStore({ config, metrics, logger });
    await store.close();
    return { ok: true, line: `images.url: ${where}: ${describeImageCheck(config)}` };
  } catch (err) {
    if (err instanceof ConfigError) return { ok: false, line: err.problems.join("; ") };
    return { ok: false, line: `images.url: ${where}: ${(err as Error).message}` };
  }
}
