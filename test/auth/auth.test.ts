import { generateKeyPair, SignJWT } from "jose";
import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { expectError, sdkError } from "../http/error-envelope.js";
import { startTestApp, TEST_KEYS, type TestApp } from "../support/start-test-app.js";

const SECRET = "test-jwt-secret-0123456789abcdef";
const ISSUER = "https://issuer.example";
const AUDIENCE = "image-task-sidecar";

let app: TestApp;

beforeEach(async () => {
  app = await startTestApp({
    config: {
      auth: {
        keys: [
          { key: TEST_KEYS.default, group: "default" },
          { key: TEST_KEYS.vip, group: "vip" },
        ],
        jwt: { secret: SECRET, issuer: ISSUER, audience: AUDIENCE, groupClaim: "team" },
      },
    },
  });
});
afterEach(() => app.close());

interface TokenOptions {
  claims?: Record<string, unknown>;
  secret?: string;
  issuer?: string;
  audience?: string;
  subject?: string | null;
  /** `null`: no `exp` claim at all. */
  expiresIn?: string | number | null;
}

function sign(options: TokenOptions = {}): Promise<string> {
  const jwt = new SignJWT({ team: "vip", ...options.claims })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuedAt()
    .setIssuer(options.issuer ?? ISSUER)
    .setAudience(options.audience ?? AUDIENCE);
  if (options.expiresIn !== null) jwt.setExpirationTime(options.expiresIn ?? "5m");
  if (options.subject !== null) jwt.setSubject(options.subject ?? "user-42");
  return jwt.sign(new TextEncoder().encode(options.secret ?? SECRET));
}

function clientWith(apiKey: string): OpenAI {
  return new OpenAI({ apiKey, baseURL: app.baseURL, maxRetries: 0 });
}

async function modelIds(apiKey: string): Promise<string[]> {
  return (await clientWith(apiKey).models.list()).data.map((model) => model.id);
}

function get(path: string, authorization?: string): Promise<Response> {
  return fetch(`${app.baseURL}${path}`, {
    headers: authorization === undefined ? {} : { authorization },
  });
}

describe("API keys", () => {
  it("answers 401 missing_api_key without an Authorization header, on every /v1 route", async () => {
    await expectError(await get("/models"), 401, "missing_api_key");
    await expectError(await get("/models/gpt-4o-mini"), 401, "missing_api_key");
    await expectError(await get("/no-such-route"), 401, "missing_api_key");
    for (const path of ["/chat/completions", "/images/generations"]) {
      const response = await fetch(`${app.baseURL}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-4o-mini", messages: [] }),
      });
      await expectError(response, 401, "missing_api_key");
    }
    expect(app.upstream.requests).toHaveLength(0);
  });

  it("answers 401 invalid_api_key for an unknown key through the SDK", async () => {
    const error = await sdkError(clientWith("sk-not-a-key").models.list());
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(error.code).toBe("invalid_api_key");
    expect(JSON.stringify(error.error)).not.toContain("sk-not-a-key");

    const chat = await sdkError(
      clientWith("sk-not-a-key").chat.completions.create({
        model: "gpt-4o-mini",
        messages: [{ role: "user", content: "hi" }],
      }),
    );
    expect(chat.status).toBe(401);
    expect(chat.code).toBe("invalid_api_key");
    expect(app.upstream.requests).toHaveLength(0);
  });

  it("answers 401 invalid_api_key for a header that is not a bearer key", async () => {
    await expectError(await get("/models", `Basic ${btoa("a:b")}`), 401, "invalid_api_key");
    await expectError(
      await get("/models", `Bearer ${TEST_KEYS.default} extra`),
      401,
      "invalid_api_key",
    );
    // A key that was not configured in this app.
    await expectError(await get("/models", `Bearer ${TEST_KEYS.other}`), 401, "invalid_api_key");
  });

  it("accepts a configured key, with any case of 'Bearer'", async () => {
    const response = await get("/models", `bearer ${TEST_KEYS.default}`);
    expect(response.status).toBe(200);
    expect(((await response.json()) as { data: unknown[] }).data).toHaveLength(2);
  });
});

describe("JWT bearer tokens (HS256)", () => {
  it("accepts a valid token and applies the group from its claim", async () => {
    expect(await modelIds(await sign({ claims: { team: "vip" } }))).toEqual([
      "dall-e-3",
      "gpt-4o",
      "gpt-4o-mini",
      "gpt-image-1",
    ]);
    expect(await modelIds(await sign({ claims: { team: "default" } }))).toEqual([
      "gpt-4o-mini",
      "gpt-image-1",
    ]);
    const chat = clientWith(await sign({ claims: { team: "chat" } }));
    expect((await chat.models.list()).data.map((model) => model.id)).toEqual(["gpt-4o-mini"]);
    const completion = await chat.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(completion.choices[0]?.message.content).toBe("Hello from fake-upstream!");
    const refused = await sdkError(
      chat.chat.completions.create({
        model: "gpt-4o",
        messages: [{ role: "user", content: "hi" }],
      }),
    );
    expect(refused.status).toBe(404);
    expect(refused.code).toBe("model_not_found");
  });

  it("does not pass the client's JWT on to the channel", async () => {
    const token = await sign();
    const seen = app.upstream.nextRequest("chat");
    await clientWith(token).chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(JSON.stringify((await seen).headers)).not.toContain(token);
  });

  const bad: Array<[string, () => Promise<string>]> = [
    ["signed with another secret", () => sign({ secret: "another-secret-0123456789abcdef" })],
    ["expired", () => sign({ expiresIn: Math.floor(Date.now() / 1000) - 120 })],
    ["from another issuer", () => sign({ issuer: "https://evil.example" })],
    ["for another audience", () => sign({ audience: "someone-else" })],
    ["without the group claim", () => sign({ claims: { team: undefined } })],
    ["naming an unknown group", () => sign({ claims: { team: "admins" } })],
    ["without a subject", () => sign({ subject: null })],
    ["without exp (valid forever otherwise)", () => sign({ expiresIn: null })],
    // Own keys only: these must not find Object.prototype's members as groups.
    ["naming the group __proto__", () => sign({ claims: { team: "__proto__" } })],
    ["naming the group constructor", () => sign({ claims: { team: "constructor" } })],
    ["naming the group toString", () => sign({ claims: { team: "toString" } })],
    ["naming the group hasOwnProperty", () => sign({ claims: { team: "hasOwnProperty" } })],
    [
      "signed with RS256 where HS256 is configured (alg confusion)",
      async () => {
        const { privateKey } = await generateKeyPair("RS256");
        return new SignJWT({ team: "vip" })
          .setProtectedHeader({ alg: "RS256", typ: "JWT" })
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setSubject("user-42")
          .setExpirationTime("5m")
          .sign(privateKey);
      },
    ],
    [
      "signed with HS512 and the right secret (only HS256 is configured)",
      () =>
        new SignJWT({ team: "vip" })
          .setProtectedHeader({ alg: "HS512", typ: "JWT" })
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setSubject("user-42")
          .setExpirationTime("5m")
          .sign(new TextEncoder().encode(SECRET)),
    ],
    [
      "tampered with",
      async () => {
        const [header, , signature] = (await sign({ claims: { team: "default" } })).split(".");
        const payload = Buffer.from(
          JSON.stringify({ team: "vip", sub: "x", iss: ISSUER, aud: AUDIENCE, exp: 9_999_999_999 }),
        ).toString("base64url");
        return `${header}.${payload}.${signature}`;
      },
    ],
    [
      "unsigned (alg none)",
      async () => {
        const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
        return `${part({ alg: "none", typ: "JWT" })}.${part({
          team: "vip",
          sub: "x",
          iss: ISSUER,
          aud: AUDIENCE,
          exp: 9_999_999_999,
        })}.`;
      },
    ],
    ["not a JWT at all", async () => "eyJhbGciOi.garbage.garbage"],
  ];

  for (const [name, token] of bad) {
    it(`answers 401 invalid_api_key for a token ${name}`, async () => {
      const value = await token();
      const response = await get("/models", `Bearer ${value}`);
      const error = await expectError(response, 401, "invalid_api_key");
      expect(error.message).not.toContain(value);
      const sdk = await sdkError(clientWith(value).models.list());
      expect(sdk.status).toBe(401);
      expect(sdk.code).toBe("invalid_api_key");
    });
  }
});

describe("auth.jwt.requireExp: false", () => {
  it("accepts a token without exp, and still refuses an expired one", async () => {
    const lenient = await startTestApp({
      config: {
        auth: {
          keys: [],
          jwt: {
            secret: SECRET,
            issuer: ISSUER,
            audience: AUDIENCE,
            groupClaim: "team",
            requireExp: false,
          },
        },
      },
    });
    try {
      const forever = await sign({ expiresIn: null, claims: { team: "chat" } });
      const response = await fetch(`${lenient.baseURL}/models`, {
        headers: { authorization: `Bearer ${forever}` },
      });
      expect(response.status).toBe(200);
      const expired = await sign({ expiresIn: Math.floor(Date.now() / 1000) - 120 });
      await expectError(
        await fetch(`${lenient.baseURL}/models`, {
          headers: { authorization: `Bearer ${expired}` },
        }),
        401,
        "invalid_api_key",
      );
    } finally {
      await lenient.close();
    }
  });
});
