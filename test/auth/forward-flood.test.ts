import { slow } from "../support/time-factor.js";
import { randomBytes } from "node:crypto";
import { pino } from "pino";
import { Agent, fetch as undiciFetch } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load-config.js";
import { startServer, type RunningServer } from "../../src/server.js";
import { startFakeGateway, type FakeGateway } from "../support/fake-gateway.js";

const ALICE = "sk-newapi-alice-flood-0123456789abcdef";
const BOB = "sk-newapi-bob-flood-0123456789abcdef";
/** Made-up keys in the flood: enough that it outlasts the cache entry of a key checked before it. */
const FLOOD = 3_000;
const MAX_CONCURRENT = 4;
const PER_SEC = 20;

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function start(
  gw: FakeGateway,
  perClient: { maxChecksPerClientPerSec?: number; maxChecksInFlightPerClient?: number } = {},
): Promise<RunningServer> {
  const server = await startServer({
    config: parseConfig({
      // Idle connections kept past any stall of a loaded machine, as in every test app
      // (test/support/start-test-app.ts): at the default 5 s, a flooder whose pooled connection
      // the service closed as it reused it read ECONNRESET in a loaded CI run.
      server: { port: 0, host: "127.0.0.1", shutdownGraceSec: 1, keepAliveTimeoutSec: 60 },
      store: { url: "memory://" },
      auth: {
        forward: {
          channel: "newapi",
          secret: "forward-flood-secret-0123456789abcdef",
          // Short, so Alice's entry expires during the flood and she is checked again.
          cacheSec: 1,
          maxChecksInFlight: MAX_CONCURRENT,
          maxChecksPerSec: PER_SEC,
          ...perClient,
        },
      },
      groups: {},
      channels: [{ name: "newapi", baseUrl: gw.baseUrl, models: ["*"] }],
      logging: { level: "silent" },
    }),
    logger: pino({ level: "silent" }),
    defaultMetrics: false,
  });
  cleanups.push(() => server.close(200));
  return server;
}

describe("forward mode under a flood of made-up keys", () => {
  it(
    "asks the gateway at most its bounds' worth, answers the rest 503 with Retry-After, and known keys keep working",
    async () => {
      const gw = await startFakeGateway({ [ALICE]: ["gpt-4o-mini"], [BOB]: ["gpt-4o-mini"] });
      cleanups.push(() => gw.close());
      // The flood comes from one address: its own share must not be what refuses it here.
      const server = await start(gw, {
        maxChecksPerClientPerSec: 10_000,
        maxChecksInFlightPerClient: 10_000,
      });
      const models = (key: string) =>
        fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });

      // Alice is known before the flood.
      expect((await models(ALICE)).status).toBe(200);

      const started = performance.now();
      let sent = 0;
      const statuses = new Map<number, number>();
      const shed: Response[] = [];
      const flooder = async () => {
        while (sent < FLOOD) {
          sent += 1;
          const response = await models(`sk-made-up-${randomBytes(12).toString("hex")}`);
          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
          if (response.status === 503 && shed.length < 3) shed.push(response);
          else await response.arrayBuffer();
        }
      };
      // Alice keeps calling through the flood, past her cache entry's expiry.
      const alice: number[] = [];
      let flooding = true;
      const aliceLoop = (async () => {
        // Past the cache's 1 s even when the flood ends sooner, so a re-check is always due.
        while (flooding || performance.now() - started < 1500) {
          const response = await models(ALICE);
          alice.push(response.status);
          await response.arrayBuffer();
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      })();
      await Promise.all(Array.from({ length: 100 }, flooder));
      flooding = false;
      await aliceLoop;
      const seconds = (performance.now() - started) / 1000;

      // At most a second's burst, then PER_SEC a second (and the checks still running).
      const madeUpCalls = gw.modelCalls() - gw.modelCalls(ALICE);
      expect(madeUpCalls).toBeLessThanOrEqual(
        PER_SEC + Math.ceil(PER_SEC * seconds) + MAX_CONCURRENT,
      );
      expect((statuses.get(401) ?? 0) + (statuses.get(503) ?? 0)).toBe(FLOOD);
      expect(statuses.get(503) ?? 0).toBeGreaterThan(FLOOD / 2);
      for (const response of shed) {
        expect(Number(response.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
        expect(await response.json()).toMatchObject({
          error: { code: "upstream_unavailable", type: "upstream_error" },
        });
      }

      // Alice was never refused, and was checked again while the flood went on.
      expect(alice.length).toBeGreaterThan(3);
      expect(new Set(alice)).toEqual(new Set([200]));
      expect(gw.modelCalls(ALICE)).toBeGreaterThan(1);

      // Once the flood is over, a key never seen before gets in.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect((await models(BOB)).status).toBe(200);
    },
    slow(120_000),
  );
});

describe("forward mode under a flood from one address", () => {
  it(
    "answers that address 429 rate_limited past its share, so a new user at another address signs in at once",
    async () => {
      const gw = await startFakeGateway({ [BOB]: ["gpt-4o-mini"] });
      cleanups.push(() => gw.close());
      const server = await start(gw, {
        maxChecksPerClientPerSec: 2,
        maxChecksInFlightPerClient: 2,
      });
      // Two clients: Linux routes all of 127/8 to the loopback.
      const from = (localAddress: string) => {
        const agent = new Agent({ localAddress });
        cleanups.push(() => agent.close());
        return (key: string) =>
          undiciFetch(`${server.url}/v1/models`, {
            headers: { authorization: `Bearer ${key}` },
            dispatcher: agent,
          });
      };
      const flooder = from("127.0.0.2");
      const newUser = from("127.0.0.3");

      const statuses = new Map<number, number>();
      const refusals: Array<{ retryAfter: string | null; body: unknown }> = [];
      let flooding = true;
      const flood = async () => {
        while (flooding) {
          const response = await flooder(`sk-made-up-${randomBytes(12).toString("hex")}`);
          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
          if (response.status === 429 && refusals.length < 3) {
            refusals.push({
              retryAfter: response.headers.get("retry-after"),
              body: await response.json(),
            });
          } else await response.arrayBuffer();
        }
      };
      const started = performance.now();
      const floods = Promise.all(Array.from({ length: 50 }, flood));
      try {
        // Well into the flood: the address has long used up its share, and keeps trying.
        while ((statuses.get(429) ?? 0) < 200) await new Promise((r) => setTimeout(r, 50));
        const signIn = await newUser(BOB);
        expect(signIn.status, await signIn.text()).toBe(200);
      } finally {
        flooding = false;
        await floods;
      }
      const seconds = (performance.now() - started) / 1000;
      // The flooding address got its share (a second's burst, then 2 a second), no more.
      const madeUpCalls = gw.modelCalls() - gw.modelCalls(BOB);
      expect(madeUpCalls).toBeLessThanOrEqual(2 + Math.ceil(2 * seconds) + 2);
      expect(statuses.get(401) ?? 0).toBe(madeUpCalls);
      // Its own doing, not the gateway's trouble: 429, never 503.
      expect(statuses.get(503) ?? 0).toBe(0);
      for (const refusal of refusals) {
        expect(Number(refusal.retryAfter)).toBeGreaterThanOrEqual(1);
        expect(refusal.body).toMatchObject({
          error: { code: "rate_limited", type: "rate_limit_error" },
        });
      }
    },
    slow(60_000),
  );
});
