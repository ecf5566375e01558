import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { expectError } from "../http/error-envelope.js";
import { startTestApp, TEST_KEYS, type TestApp } from "../support/start-test-app.js";

// Security review, High: the group check read `model` with JSON.parse (last duplicate wins,
// exact case) while the raw bytes went on; a Go channel (keys matched in any case) or a
// first-wins parser read another model. Whatever any of them reads must be what was checked.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterEach(() => app.upstream.reset());
afterAll(() => app.close());

/** Key of group `chat`: gpt-4o-mini only. */
const KEY = TEST_KEYS.chat;
const JSON_ROUTES = [
  "/chat/completions",
  "/responses",
  "/embeddings",
  "/completions",
  "/moderations",
  "/audio/speech",
  "/images/generations",
  "/images/edits",
];

const post = (path: string, raw: string) =>
  fetch(`${app.baseURL}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: raw,
  });

const ambiguous = [
  ['{"model":"gpt-4o-mini","MODEL":"gpt-4o","input":"hi"}', "upper case"],
  ['{"model":"gpt-4o-mini","Model":"gpt-4o","input":"hi"}', "capitalised"],
  ['{"model":"gpt-4o-mini","modeL":"gpt-4o","input":"hi"}', "last letter upper"],
  ['{"model":"gpt-4o-mini","mod\\u0065L":"gpt-4o","input":"hi"}', "escaped letter"],
  ['{"MODEL":"gpt-4o","model":"gpt-4o-mini","input":"hi"}', "variant first"],
  ['{"model":"gpt-4o","model":"gpt-4o-mini","input":"hi"}', "exact duplicate, first wins"],
  ['{"mod\\u0065l":"gpt-4o","model":"gpt-4o-mini","input":"hi"}', "escaped duplicate"],
  ['{"\\u006d\\u006f\\u0064\\u0065\\u006c":"gpt-4o","model":"gpt-4o-mini"}', "all escaped"],
] as const;

describe("a body that names its model more than once", () => {
  it.each(JSON_ROUTES)(
    "is refused with 400 invalid_value on %s, before the channel",
    async (path) => {
      for (const [raw, what] of ambiguous) {
        const error = await expectError(await post(path, raw), 400, "invalid_value", "model");
        expect(error.message, what).toContain("model");
      }
      expect(app.upstream.requests).toHaveLength(0);
    },
  );
});

describe("a body every parser reads alike", () => {
  it.each(JSON_ROUTES)(
    "passes on %s, and the channel reads the model that was checked",
    async (path) => {
      const accepted = [
        '{"model":"gpt-4o-mini","input":"hi"}',
        '{"mod\\u0065l":"gpt-4o-mini","input":"hi"}',
        // Nested `model` keys and a "model" value are no second model.
        '{"model":"gpt-4o-mini","input":[{"role":"model","content":"x"}],"metadata":{"model":"gpt-4o","MODEL":"x"}}',
        '\ufeff{"model":"gpt-4o-mini","input":"hi"}',
      ];
      for (const raw of accepted) {
        const response = await post(path, raw);
        expect(response.status, raw).toBe(200);
        await response.arrayBuffer();
      }
      expect(app.upstream.requests).toHaveLength(accepted.length);
      for (const request of app.upstream.requests) {
        expect(request.model).toEqual({
          first: "gpt-4o-mini",
          last: "gpt-4o-mini",
          goLike: "gpt-4o-mini",
        });
      }
    },
  );

  it("refuses a model named only in another spelling as missing, never passing it on", async () => {
    await expectError(
      await post("/chat/completions", '{"MODEL":"gpt-4o","messages":[]}'),
      400,
      "missing_required_parameter",
      "model",
    );
    expect(app.upstream.requests).toHaveLength(0);
  });
});

describe("a multipart form that names its model more than once", () => {
  const form = (parts: Array<[string, string]>, extraHeaders = "") => {
    const boundary = "----sidecar-test-boundary";
    const body = parts
      .map(
        ([name, value]) =>
          `--${boundary}\r\nContent-Disposition: form-data; name="${name}"${extraHeaders}\r\n\r\n${value}\r\n`,
      )
      .join("");
    return {
      body: `${body}--${boundary}--\r\n`,
      type: `multipart/form-data; boundary=${boundary}`,
    };
  };
  const send = (path: string, { body, type }: { body: string | Buffer; type: string }) =>
    fetch(`${app.baseURL}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": type },
      body,
    });

  it("is refused with 400 invalid_value, before the channel", async () => {
    for (const parts of [
      [
        ["model", "gpt-4o-mini"],
        ["model", "gpt-4o"],
      ],
      [
        ["model", "gpt-4o-mini"],
        ["Model", "gpt-4o"],
      ],
      [
        ["MODEL", "gpt-4o"],
        ["model", "gpt-4o-mini"],
      ],
      [
        ["model", "gpt-4o-mini"],
        ["mod%65l", "gpt-4o"],
      ],
    ] as Array<Array<[string, string]>>) {
      await expectError(
        await send("/audio/transcriptions", form([["file", "x"], ...parts])),
        400,
        "invalid_value",
        "model",
      );
    }
    expect(app.upstream.requests).toHaveLength(0);
  });

  it("refuses a second model after the form started streaming, and the channel never gets it whole", async () => {
    const boundary = "----sidecar-late-model";
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\ngpt-4o-mini\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.mp3"\r\nContent-Type: audio/mpeg\r\n\r\n`;
    const tail = `\r\n--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\ngpt-4o\r\n--${boundary}--\r\n`;
    const body = Buffer.concat([
      Buffer.from(head),
      Buffer.alloc(2 * 1024 * 1024, 1),
      Buffer.from(tail),
    ]);
    await expectError(
      await send("/audio/transcriptions", {
        body,
        type: `multipart/form-data; boundary=${boundary}`,
      }),
      400,
      "invalid_value",
      "model",
    );
    while (app.upstream.aborted < 1) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(app.upstream.requests).toHaveLength(0);
  });

  it("refuses ambiguous field names and encodings parsers disagree on", async () => {
    const boundary = "b0undary";
    const raw = (part: string) => ({
      body: `--${boundary}\r\n${part}\r\n--${boundary}--\r\n`,
      type: `multipart/form-data; boundary=${boundary}`,
    });
    for (const part of [
      `Content-Disposition: form-data; name*=utf-8''model\r\n\r\ngpt-4o`,
      `Content-Disposition: form-data; name="mod\\el"\r\n\r\ngpt-4o`,
      `Content-Disposition: form-data; name="model"; filename="m.txt"\r\n\r\ngpt-4o-mini`,
      `Content-Disposition: form-data; name="model"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\ngpt-4o-mini`,
      `Content-Disposition: form-data; name="file"\nContent-Disposition: form-data; name="model"\r\n\r\ngpt-4o`,
      `Content-Disposition: form-data; name="model"; name="file"\r\n\r\ngpt-4o-mini`,
    ]) {
      await expectError(await send("/audio/transcriptions", raw(part)), 400, "invalid_value");
    }
    expect(app.upstream.requests).toHaveLength(0);
  });
});
