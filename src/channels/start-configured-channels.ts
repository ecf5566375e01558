import { createChannel, type Channel } from "./channel.js";
import type { ChannelConfig } from "../config/config-schema.js";
import { startDemoChannel, type DemoChannel } from "../demo/start-demo-channel.js";

/** The configured channels, ready to call, and how to stop the demo channels among them. */
export interface ConfiguredChannels {
  channels: Channel[];
  /** Stops every demo channel started for them. */
  close: () => Promise<void>;
}

/**
 * The configured channels, in order; each demo channel (`type: demo`) is
 * started here, on a port of its own, and named by its URL. A start that
 * fails stops the demo channels already started.
 */
export async function startConfiguredChannels(
  configured: readonly ChannelConfig[],
): Promise<ConfiguredChannels> {
  const channels: Channel[] = [];
  const demos: DemoChannel[] = [];
  const close = async () => {
    await Promise.all(demos.splice(0).map((demo) => demo.close()));
  };
  try {
    for (const channel of configured) {
      if (channel.type === "demo") {
        const demo = await startDemoChannel({ imageDelayMs: channel.imageDelayMs });
        demos.push(demo);
        channels.push(createChannel({ ...channel, baseUrl: demo.baseUrl }));
      } else {
        channels.push(createChannel({ ...channel, baseUrl: channel.baseUrl as string }));
      }
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { channels, close };
}
