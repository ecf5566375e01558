import type { lookup as dnsLookup } from "node:dns";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fetch } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGuardedAgent } from "../../src/net/create-guarded-agent.js";

let server: Server;
let port: number;
let hits = 0;

beforeAll(async () => {
  server = createServer((_req, res) => {
    hits += 1;
    res.end("reached");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

/** A DNS that answers 127.0.0.1 for every name: what a rebinding attacker's DNS does. */
const rebindingDns = ((
  _hostname: string,
  options: { all?: boolean },
  callback: (err: null, address: unknown, family?: number) => void,
) => {
  if (options.all) callback(null, [{ address: "127.0.0.1", family: 4 }]);
  else callback(null, "127.0.0.1", 4);
}) as unknown as typeof dnsLookup;

async function failureCode(url: string, agent: ReturnType<typeof createGuardedAgent>) {
  try {
    await fetch(url, { dispatcher: agent, redirect: "manual" });
    return "connected";
  } catch (err) {
    return (err as { cause?: { code?: string } }).cause?.code;
  }
}

describe("createGuardedAgent", () => {
  it("refuses a name whose DNS answer is loopback, at connect time", async () => {
    const agent = createGuardedAgent({ lookup: rebindingDns });
    const before = hits;
    expect(await failureCode(`http://images.example:${port}/x.png`, agent)).toBe(
      "ERR_FORBIDDEN_ADDRESS",
    );
    expect(hits).toBe(before);
    await agent.close();
  });

  it("refuses loopback literals and localhost, reaching nothing", async () => {
    const agent = createGuardedAgent();
    const before = hits;
    for (const host of ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "2130706433"]) {
      expect(await failureCode(`http://${host}:${port}/`, agent), host).toBe(
        "ERR_FORBIDDEN_ADDRESS",
      );
    }
    expect(hits).toBe(before);
    await agent.close();
  });

  it("connects with allowPrivateNetworks (the same requests, so the refusals above were the guard)", async () => {
    const agent = createGuardedAgent({ allowPrivateNetworks: true, lookup: rebindingDns });
    const response = await fetch(`http://images.example:${port}/x.png`, { dispatcher: agent });
    expect(await response.text()).toBe("reached");
    const literal = await fetch(`http://127.0.0.1:${port}/`, { dispatcher: agent });
    expect(literal.status).toBe(200);
    await literal.text();
    await agent.close();
  });
});
