import { fork } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const CHANNEL_KEY = "sk-bench-channel-secret-0001";
const KEY = "sk-bench-client-key-0001";
const dir = mkdtempSync(join(tmpdir(), "bench-service-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The bench's own start of the service (bench/lib/service-process.mjs) on the built dist/. */
async function startBenchService(config: unknown, logFile: string) {
  const file = join(dir, "service.json");
  writeFileSync(file, JSON.stringify(config));
  const child = fork(
    join(ROOT, "bench/lib/service-process.mjs"),
    [join(ROOT, "dist"), file, JSON.stringify({ logFile })],
    { stdio: ["ignore", "ignore", "inherit", "ipc"] },
  );
  const url = await new Promise<string>((done, fail) => {
    child.once("message", (message: { url: string }) => done(message.url));
    child.once("exit", (code) => fail(new Error(`the bench's service exited (${code})`)));
  });
  const stop = () =>
    new Promise<void>((done) => {
      child.once("exit", () => done());
      child.send({ type: "stop" });
    });
  return { url, stop };
}

describe("the bench's service", () => {
  it("searches its log lines for the configuration's credentials, as the bin does", async () => {
    const logFile = join(dir, "service.log");
    const service = await startBenchService(
      {
        server: { port: 0, host: "127.0.0.1" },
        store: { url: "memory://" },
        auth: { keys: [{ key: KEY, group: "bench", name: "bench" }] },
        groups: { bench: { models: ["gpt-4o-mini"] } },
        channels: [
          {
            name: "fake",
            baseUrl: "http://127.0.0.1:9/v1",
            apiKey: CHANNEL_KEY,
            models: ["gpt-4o-mini"],
          },
        ],
        logging: { level: "info", access: true },
      },
      logFile,
    );
    try {
      // A client that sends the channel's key as its request id: the access line carries it.
      const answer = await fetch(`${service.url}/v1/models`, {
        headers: { authorization: `Bearer ${KEY}`, "x-request-id": CHANNEL_KEY },
      });
      expect(answer.status).toBe(200);
    } finally {
      await service.stop();
    }
    const lines = readFileSync(logFile, "utf8").trim().split("\n");
    const access = lines
      .map((line) => JSON.parse(line))
      .find((line) => line.route === "/v1/models");
    expect(access).toMatchObject({ status: 200, req_id: "[redacted]" });
    expect(readFileSync(logFile, "utf8")).not.toContain(CHANNEL_KEY);
  });
});
