import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openRaw, until } from "../support/raw-connection.js";
import { startTestApp, TEST_KEYS, type TestApp } from "../support/start-test-app.js";

// A JSON body that comes in the packet of its headers is all in the request's buffer before
// Node's parser has completed the message; the passthrough takes it from there at once (since
// 2026-12-04; a turn of the event loop later before), as a body read through listeners: the
// same answers, and an error answer keeps the connection (it is not one whose body went
// unread), also when it goes out before the parser has completed the message.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

/** One request, headers and body in one write. */
function request(body: string): string {
  return (
    `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n` +
    `authorization: Bearer ${TEST_KEYS.default}\r\ncontent-type: application/json\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

describe("a JSON body sent with its headers", () => {
  it("is answered, and its error answers keep the connection for the next request", async () => {
    const port = Number(new URL(app.url).port);
    const raw = await openRaw(port);
    const statuses = () => raw.received.match(/HTTP\/1\.1 \d{3}/g) ?? [];
    raw.send(request(JSON.stringify({ model: "no-such-model", messages: [] })));
    await until(() => statuses().length === 1, 10_000, "the first answer");
    raw.send(request(JSON.stringify({ model: "gpt-4o-mini", messages: [] })));
    await until(() => statuses().length === 2, 10_000, "the second answer");
    expect(statuses()).toEqual(["HTTP/1.1 404", "HTTP/1.1 200"]);
    expect(raw.received.toLowerCase()).not.toContain("connection: close");
    expect(raw.closed).toBe(false);
  });

  it("answers requests pipelined in one packet, in order, on the one connection", async () => {
    const port = Number(new URL(app.url).port);
    const raw = await openRaw(port);
    const statuses = () => raw.received.match(/HTTP\/1\.1 \d{3}/g) ?? [];
    raw.send(
      request(JSON.stringify({ model: "gpt-4o-mini", messages: [] })) +
        request(JSON.stringify({ model: "no-such-model", messages: [] })) +
        request(JSON.stringify({ model: "gpt-4o-mini", messages: [] })),
    );
    await until(() => statuses().length === 3, 10_000, "three answers");
    expect(statuses()).toEqual(["HTTP/1.1 200", "HTTP/1.1 404", "HTTP/1.1 200"]);
    expect(raw.received).toContain('"code":"model_not_found"');
    expect(raw.received.toLowerCase()).not.toContain("connection: close");
    expect(raw.closed).toBe(false);
  });
});
