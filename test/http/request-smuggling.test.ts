import { connect } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/start-test-app.js";

// Requests whose framing two parsers could read differently (RFC 9112 sections 6.1 and 6.3) are
// refused before anything reaches a channel: a front proxy and this service must never disagree
// on where one request ends and the next begins.

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());
beforeEach(() => app.upstream.reset());

/**
 * Writes raw bytes and reads everything until the service closes the connection; a service that
 * keeps it open (waiting for more of a body it misread) fails the test after a while.
 */
function raw(bytes: string): Promise<string> {
  const { hostname, port } = new URL(app.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(bytes));
    let answer = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(`the service kept the connection open; it answered ${JSON.stringify(answer)}`),
      );
    }, 5000);
    const done = () => {
      clearTimeout(timer);
      resolve(answer);
    };
    socket.setEncoding("utf8").on("data", (chunk: string) => (answer += chunk));
    socket.on("close", done);
    socket.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code !== "ECONNRESET") reject(err);
    });
  });
}

const chatBody = JSON.stringify({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "x" }],
});

/** A complete, valid chat request: what an attacker hides inside the first one's body. */
function smuggled(): string {
  return (
    `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${app.key}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${chatBody.length}\r\n\r\n${chatBody}`
  );
}

function head(path: string, lines: string[]): string {
  return [
    `POST ${path} HTTP/1.1`,
    "Host: x",
    `Authorization: Bearer ${app.key}`,
    "Content-Type: application/json",
    ...lines,
    "",
    "",
  ].join("\r\n");
}

const attempts: Array<[string, (path: string) => string]> = [
  [
    "Content-Length and Transfer-Encoding together (CL.TE)",
    (path) =>
      head(path, [`Content-Length: ${chatBody.length + 5}`, "Transfer-Encoding: chunked"]) +
      `0\r\n\r\n${smuggled()}`,
  ],
  [
    "Transfer-Encoding and Content-Length together (TE.CL)",
    (path) =>
      head(path, ["Transfer-Encoding: chunked", "Content-Length: 4"]) +
      `${chatBody.length.toString(16)}\r\n${chatBody}\r\n0\r\n\r\n`,
  ],
  [
    "two different Content-Lengths",
    (path) =>
      head(path, [`Content-Length: ${chatBody.length}`, "Content-Length: 0"]) +
      chatBody +
      smuggled(),
  ],
  [
    "a Content-Length list",
    (path) => head(path, [`Content-Length: ${chatBody.length}, 0`]) + chatBody,
  ],
  [
    "a signed Content-Length",
    (path) => head(path, [`Content-Length: +${chatBody.length}`]) + chatBody,
  ],
  [
    "a chunk size that is not hex",
    (path) => head(path, ["Transfer-Encoding: chunked"]) + `zz\r\n${chatBody}\r\n0\r\n\r\n`,
  ],
  [
    "a chunk size that overflows",
    (path) =>
      head(path, ["Transfer-Encoding: chunked"]) + `fffffffffffffffff1\r\n${chatBody}\r\n0\r\n\r\n`,
  ],
  [
    "a chunk size with a leading space",
    (path) =>
      head(path, ["Transfer-Encoding: chunked"]) +
      ` ${chatBody.length.toString(16)}\r\n${chatBody}\r\n0\r\n\r\n`,
  ],
  [
    "a chunk without its CRLF",
    (path) =>
      head(path, ["Transfer-Encoding: chunked"]) +
      `${chatBody.length.toString(16)}\r\n${chatBody}XX0\r\n\r\n`,
  ],
  [
    "an obs-folded Transfer-Encoding",
    (path) =>
      head(path, [`Content-Length: ${chatBody.length}`, "Transfer-Encoding:", " chunked"]) +
      chatBody,
  ],
  [
    "an obs-folded header line",
    (path) => head(path, [`Content-Length: ${chatBody.length}`, "X-Folded: a", "\tb"]) + chatBody,
  ],
  [
    "a space before the colon",
    (path) =>
      head(path, [`Content-Length: ${chatBody.length}`, "Transfer-Encoding : chunked"]) + chatBody,
  ],
  [
    "a Transfer-Encoding that does not end in chunked",
    (path) => head(path, ["Transfer-Encoding: chunked, identity"]) + `0\r\n\r\n${smuggled()}`,
  ],
  [
    "an unknown Transfer-Encoding",
    (path) => head(path, ["Transfer-Encoding: xchunked"]) + `0\r\n\r\n${smuggled()}`,
  ],
  [
    "a bare LF line ending in the headers",
    (path) =>
      `POST ${path} HTTP/1.1\r\nHost: x\nTransfer-Encoding: chunked\r\n` +
      `Authorization: Bearer ${app.key}\r\nContent-Length: ${chatBody.length}\r\n\r\n${chatBody}`,
  ],
  [
    "a NUL in a header value",
    (path) => head(path, [`Content-Length: ${chatBody.length}`, "X-Evil: a\u0000b"]) + chatBody,
  ],
];

describe("HTTP request smuggling attempts", () => {
  for (const path of ["/v1/chat/completions", "/v1/images/tasks"]) {
    for (const [name, build] of attempts) {
      it(`${path}: refuses ${name}`, async () => {
        const answer = await raw(build(path));
        // Either one 400 envelope and a closed connection, or a connection closed unanswered.
        if (answer !== "") {
          expect(answer).toMatch(/^HTTP\/1\.1 400 /);
          expect(answer.match(/HTTP\/1\.1 /g)).toHaveLength(1);
          const body = answer.slice(answer.indexOf("\r\n\r\n") + 4);
          expect((JSON.parse(body) as { error: { code: string } }).error.code).toBe(
            "invalid_value",
          );
        }
        expect(app.upstream.requests).toEqual([]);
      });
    }
  }

  it("serves the same requests when framed correctly (so the refusals were the framing)", async () => {
    const answer = await raw(
      smuggled().replace("HTTP/1.1\r\n", "HTTP/1.1\r\nConnection: close\r\n"),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(app.upstream.requests).toHaveLength(1);
  });
});
