import { Pipeline } from "ioredis";
import type { RedisClient } from "./redis-client.js";

/** What ioredis keeps of the commands defined on a client (its `Commander`). */
interface CommandSets {
  scriptsSet: Record<string, unknown>;
  addedBuiltinSet: Set<string>;
  pipeline(commands?: unknown[][]): Pipeline;
  defineCommand(...args: unknown[]): unknown;
  addBuiltinCommand(...args: unknown[]): unknown;
  [method: string]: unknown;
}

type PipelineClass = new (client: RedisClient) => Pipeline;

/**
 * Makes `client`'s pipelines cheap to build whatever it has defined. ioredis
 * copies every script defined on a client (BullMQ defines about 65 on the
 * clients it is given) onto each pipeline it makes, two properties each, and
 * an auto-pipelined client makes one pipeline per batch: about 65 µs a batch,
 * more than the batch's socket write saves. Here the scripts sit once on the
 * prototype of a pipeline class of the client's own (rebuilt when a command
 * is defined), and a pipeline is made with nothing to copy; it calls them,
 * and sends, as before (the copy's one other use, a table of scripts by SHA,
 * is read nowhere in ioredis 5).
 */
export function lightPipelines(client: RedisClient): void {
  const c = client as unknown as CommandSets;
  // Internals of ioredis 5: on a release that keeps them otherwise, its own pipelines stay.
  if (typeof c.scriptsSet !== "object" || !(c.addedBuiltinSet instanceof Set)) return;
  let Light: PipelineClass | undefined;
  for (const method of ["defineCommand", "addBuiltinCommand"] as const) {
    const define = c[method];
    c[method] = function (this: CommandSets, ...args: unknown[]) {
      Light = undefined;
      return define.apply(this, args);
    };
  }
  const nothing = { scripts: {}, builtins: new Set<string>() };
  c.pipeline = function (this: CommandSets, commands?: unknown[][]) {
    Light ??= lightClass(this);
    const { scriptsSet, addedBuiltinSet } = this;
    // Seen empty by the constructor only (it copies them, synchronously, and keeps nothing).
    this.scriptsSet = nothing.scripts;
    this.addedBuiltinSet = nothing.builtins;
    let pipeline: Pipeline;
    try {
      pipeline = new Light(this as unknown as RedisClient);
    } finally {
      this.scriptsSet = scriptsSet;
      this.addedBuiltinSet = addedBuiltinSet;
    }
    if (Array.isArray(commands)) pipeline.addBatch(commands);
    return pipeline;
  };
}

/** A pipeline class whose prototype holds `client`'s defined commands, as ioredis copies them. */
function lightClass(client: CommandSets): PipelineClass {
  class LightPipeline extends Pipeline {}
  const prototype = LightPipeline.prototype as unknown as Record<string, unknown>;
  for (const name of [...Object.keys(client.scriptsSet), ...client.addedBuiltinSet]) {
    prototype[name] = client[name];
    prototype[`${name}Buffer`] = client[`${name}Buffer`];
  }
  return LightPipeline;
}
