import { pino } from "pino";
import { describe, expect, it, onTestFinished } from "vitest";
import { captureLines } from "../../logging/capture-lines.js";
import { deleteKeys, uniquePrefix } from "../../support/redis.js";
import { slow } from "../../support/time-factor.js";
import { useApp, type ApiResponse, type Target } from "../task-api.js";
import { startChaosChannel, type ChaosAnswer } from "./chaos-channel.js";
import {
  channels,
  each,
  expectLogsClean,
  expectWell,
  SEED,
  storyOf,
  taskTimeoutSec,
} from "./chaos-checks.js";
import { runDialectTask } from "./chaos-dialects.js";
import { mcpClient, runMcpTask } from "./chaos-mcp.js";
import {
  runChaosResponse,
  runChaosTask,
  startReceiver,
  WEBHOOK_SECRET,
  type TaskPlaces,
} from "./chaos-tasks.js";

/*
 * The random channels' image tasks, background responses, sub2api/Bifrost tasks and MCP tools
 * (random-channel-answers, -responses, -dialects and -mcp) on two replicas of one deployment (one Redis
 * prefix): each is submitted to one replica and watched, cancelled, deleted and polled on the
 * other, while both run them. The checks are the same: every task and response ends, as the other replica says
 * too; a cancel or delete sent to the replica that is not running the task wins there; no
 * generation is paid for twice; a task's webhook comes once, from whichever replica ended it.
 * And a rollout: one replica stopped (gracefully) once every task was submitted, while it runs
 * its share: it finishes the calls it holds, hands its async jobs' polls over, and no task is
 * lost, stuck or made twice.
 */

const TASKS = 32;
const RESPONSES = 24;
const DIALECT_TASKS = 24;
const MCP_TASKS = 24;

/** Two replicas on a prefix of the test's own in front of the random channels. */
async function useReplicas() {
  const prefix = uniquePrefix("chaos-replicas");
  onTestFinished(async () => {
    await deleteKeys(prefix);
  });
  const channel = await startChaosChannel(SEED);
  onTestFinished(() => channel.close());
  const hooks = await startReceiver();
  const lines: string[][] = [];
  const replica = async () => {
    const captured = captureLines();
    lines.push(captured.lines);
    return useApp({
      redis: { prefix },
      logger: pino({ level: "info" }, captured.stream),
      config: {
        channels: channels(channel.baseUrl),
        webhooks: { secret: WEBHOOK_SECRET, allowPrivateNetworks: true },
      },
      imageTasks: { timeoutSec: taskTimeoutSec(), maxConcurrent: 16, pollIntervalSec: 1 },
    });
  };
  const [a, b] = await Promise.all([replica(), replica()]);
  const places = (n: number): TaskPlaces =>
    n % 2 === 0 ? { here: a, there: b } : { here: b, there: a };
  return { channel, hooks, a, b, places, lines: () => lines.flat() };
}

/** The checks of every random-channel test, over both replicas' logs; both still answer. */
async function expectBothWell(
  replicas: { a: Target; b: Target; lines: () => string[]; channel: { answers: ChaosAnswer[] } },
  ends: Array<{ n: number; answer: ApiResponse }>,
  seen: string[],
) {
  const story = (n: number) => storyOf(replicas.channel.answers, n);
  await expectWell(replicas.a, ends, seen, replicas.lines(), story);
  expect((await fetch(`${replicas.b.url}/healthz`)).status).toBe(200);
  expect((await fetch(`${replicas.b.url}/metrics`)).status).toBe(200);
}

describe("random channel answers on two replicas (Redis)", () => {
  it(
    `every image task ends, once, whichever replica runs it (seed ${SEED})`,
    {
      timeout: slow(120_000),
    },
    async () => {
      const replicas = await useReplicas();
      const { channel, hooks, places } = replicas;
      const seen: string[] = [];
      const ends = await each(
        TASKS,
        (n) => storyOf(channel.answers, n),
        (n) => runChaosTask(n, places(n), channel, hooks, seen),
      );
      await expectBothWell(replicas, ends, seen);
    },
  );

  it(
    `every background response ends, once, whichever replica runs it (seed ${SEED})`,
    {
      timeout: slow(120_000),
    },
    async () => {
      const replicas = await useReplicas();
      const { channel, places } = replicas;
      const seen: string[] = [];
      const ends = await each(
        RESPONSES,
        (n) => storyOf(channel.answers, n),
        (n) => runChaosResponse(n, places(n), channel, seen),
      );
      await expectBothWell(replicas, ends, seen);
    },
  );

  it(
    `every sub2api and Bifrost task ends in its dialect, whichever replica runs it (seed ${SEED})`,
    {
      timeout: slow(120_000),
    },
    async () => {
      const replicas = await useReplicas();
      const { channel, places } = replicas;
      const story = (n: number) => storyOf(channel.answers, n);
      const seen: string[] = [];
      const ends = await each(DIALECT_TASKS, story, (n) =>
        runDialectTask(n, places(n), story, seen),
      );
      await expectBothWell(replicas, ends, seen);
    },
  );

  it(
    `every MCP task ends, started on one replica's MCP server and collected on the other's (seed ${SEED})`,
    {
      timeout: slow(120_000),
    },
    async () => {
      const replicas = await useReplicas();
      const { channel, a, b } = replicas;
      const [onA, onB] = await Promise.all([mcpClient(a), mcpClient(b)]);
      const story = (n: number) => storyOf(channel.answers, n);
      const ends = await each(MCP_TASKS, story, (n) =>
        runMcpTask(n, n % 2 === 0 ? { start: onA, check: onB } : { start: onB, check: onA }, story),
      );
      expect(ends).toContain("completed");
      expect(ends).toContain("failed");
      for (const replica of [a, b])
        expect((await fetch(`${replica.url}/healthz`)).status).toBe(200);
      expectLogsClean(replicas.lines());
    },
  );

  it(
    `a replica stopped mid-run: every task still ends, once (seed ${SEED})`,
    {
      timeout: slow(120_000),
    },
    async () => {
      const replicas = await useReplicas();
      const { channel, hooks, a, b } = replicas;
      const stop = stopOnceAll(TASKS, a);
      const seen: string[] = [];
      // Half submitted to the replica that stops; every task followed on the one that stays.
      const ends = await each(
        TASKS,
        (n) => storyOf(channel.answers, n),
        (n) => {
          const places = { here: n % 2 === 0 ? a : b, there: b, onAccepted: stop.accepted };
          return runChaosTask(n, places, channel, hooks, seen);
        },
      );
      await stop.stopped();
      await expectWell(b, ends, seen, replicas.lines(), (n) => storyOf(channel.answers, n));
    },
  );

  it(
    `a replica stopped mid-run: every sub2api and Bifrost task still ends (seed ${SEED})`,
    {
      timeout: slow(120_000),
    },
    async () => {
      const replicas = await useReplicas();
      const { channel, a, b } = replicas;
      const stop = stopOnceAll(DIALECT_TASKS, a);
      const story = (n: number) => storyOf(channel.answers, n);
      const seen: string[] = [];
      const ends = await each(DIALECT_TASKS, story, (n) =>
        runDialectTask(
          n,
          { here: n % 2 === 0 ? a : b, there: b, onAccepted: stop.accepted },
          story,
          seen,
        ),
      );
      await stop.stopped();
      await expectWell(b, ends, seen, replicas.lines(), story);
    },
  );

  it(
    `a replica stopped mid-run: every background response still ends, once (seed ${SEED})`,
    {
      timeout: slow(120_000),
    },
    async () => {
      const replicas = await useReplicas();
      const { channel, a, b } = replicas;
      const stop = stopOnceAll(RESPONSES, a);
      const seen: string[] = [];
      // Created on the replica that stops, but those created and watched in one request (a stop
      // ends the replica's streams: a client picks the stream up on another with Last-Event-ID).
      const ends = await each(
        RESPONSES,
        (n) => storyOf(channel.answers, n),
        (n) => {
          const places = { here: n % 3 !== 1 ? a : b, there: b, onAccepted: stop.accepted };
          return runChaosResponse(n, places, channel, seen);
        },
      );
      await stop.stopped();
      await expectWell(b, ends, seen, replicas.lines(), (n) => storyOf(channel.answers, n));
    },
  );
});

/**
 * A rollout's stop of `replica`, a moment after `count` submissions were accepted (while it runs
 * its share), with a grace that outlasts a held call (the task's timeout) and its storing.
 */
function stopOnceAll(
  count: number,
  replica: { server: { close(graceMs?: number): Promise<void> } },
) {
  let accepted = 0;
  let stopped: Promise<void> = Promise.resolve();
  return {
    accepted: () => {
      accepted += 1;
      if (accepted !== count) return;
      stopped = new Promise((resolve) => setTimeout(resolve, 300)).then(() =>
        replica.server.close(taskTimeoutSec() * 1000 + slow(10_000)),
      );
    },
    stopped: () => stopped,
  };
}
