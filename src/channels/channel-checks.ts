import type { Logger } from "pino";
import type { Metrics } from "../metrics/create-metrics.js";
import type { Channel } from "./channel.js";
import type { ChannelClient } from "./channel-client.js";
import { checkChannel, type ChannelCheck } from "./check-channel.js";

/** How often every channel's model list is fetched again. */
const CHECK_EVERY_MS = 60_000;

/** Dependencies of {@link createChannelChecks}. */
export interface ChannelChecksDeps {
  /** Every configured channel, in the config's order (its index names the field). */
  channels: readonly Channel[];
  client: ChannelClient;
  logger: Logger;
  metrics: Pick<Metrics, "channelUp">;
  /** Default 60 s. */
  intervalMs?: number;
}

/** The channels' model lists, fetched at start-up and every minute (see {@link checkChannel}). */
export interface ChannelChecks {
  /** Each channel's last result by name: `"ok"` or what was wrong; absent before its first check. */
  statuses(): Record<string, string>;
  /** Checks every channel now; resolves the results in the config's order. */
  runAll(): Promise<ChannelCheck[]>;
  /** Checks now (not waited for), then every interval. */
  start(): void;
  stop(): void;
}

/**
 * Fetches every channel's model list at start-up and periodically, so a
 * wrong base URL or key is said at start-up rather than on a paid request:
 * a problem is logged as a warning naming the field (`channels[0].baseUrl:
 * ... answered 404; does baseUrl end in /v1?`) when it first appears, and an
 * info line when it is gone. Channels do not make the service unready: the
 * results are reported on `/readyz` and as `channel_up`.
 */
export function createChannelChecks(deps: ChannelChecksDeps): ChannelChecks {
  const { channels, client, logger, metrics } = deps;
  const last = new Map<string, ChannelCheck>();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<ChannelCheck[]> | undefined;

  const record = (check: ChannelCheck) => {
    const before = last.get(check.name);
    last.set(check.name, check);
    metrics.channelUp.set({ channel: check.name }, check.status === "ok" ? 1 : 0);
    if (check.problem && before?.problem !== check.problem) {
      logger.warn({ channel: check.name }, `${check.problem} (channel "${check.name}")`);
    } else if (!check.problem && before?.problem) {
      logger.info({ channel: check.name }, `channel "${check.name}" answers its model list again`);
    }
  };
  const runAll = () => {
    running ??= Promise.all(
      channels.map((channel, index) => checkChannel(client, channel, index)),
    ).then((checks) => {
      running = undefined;
      for (const check of checks) record(check);
      return checks;
    });
    return running;
  };

  return {
    statuses: () => Object.fromEntries([...last].map(([name, check]) => [name, check.status])),
    runAll,
    start() {
      void runAll();
      timer = setInterval(() => void runAll(), deps.intervalMs ?? CHECK_EVERY_MS);
      timer.unref();
    },
    stop() {
      clearInterval(timer);
    },
  };
}
