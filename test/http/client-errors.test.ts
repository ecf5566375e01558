import { connect } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/start-test-app.js";

let app: TestApp;
beforeEach(async () => {
  app = await startTestApp();
});
afterEach(() => app.close());

/** Sends raw bytes, as a broken client or a scanner would, and reads the whole answer. */
function raw(bytes: string): Promise<string> {
  const { hostname, port } = new URL(app.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.end(bytes));
    let answer = "";
    socket.setEncoding("utf8").on("data", (chunk: string) => (answer += chunk));
    socket.on("close", () => resolve(answer));
    socket.on("error", reject);
  });
}

function envelopeOf(answer: string): { error: { code: string } } {
  return JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as { error: { code: string } };
}

describe("requests Node cannot parse still get the envelope", () => {
  it("answers headers over Node's limit with 431 and the envelope", async () => {
    const response = await fetch(`${app.url}/v1/models/${"x".repeat(20_000)}`, {
      headers: { authorization: `Bearer ${app.key}`, "x-padding": "y".repeat(20_000) },
    });
    expect(response.status).toBe(431);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe(
      "request_headers_too_large",
    );
  });

  it("answers broken HTTP with 400 and the envelope", async () => {
    const answer = await raw("GET /v1/models HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toMatch(/content-type: application\/json/i);
    expect(envelopeOf(answer).error.code).toBe("invalid_value");
  });
});
