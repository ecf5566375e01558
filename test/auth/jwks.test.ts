import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey, type JWK } from "jose";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, TEST_KEYS, type TestApp } from "../support/start-test-app.js";

let jwksServer: Server;
let jwksRequests = 0;
let app: TestApp;
let signingKey: CryptoKey;
let strangerKey: CryptoKey;
let publicKeyPem: string;
let publicJwk: JWK;

beforeAll(async () => {
  const pair = await generateKeyPair("RS256");
  signingKey = pair.privateKey;
  strangerKey = (await generateKeyPair("RS256")).privateKey;
  const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "RS256", use: "sig" };
  publicKeyPem = await exportSPKI(pair.publicKey);
  publicJwk = jwk;
  // A real JWKS endpoint on a socket, as an identity provider serves it.
  jwksServer = createServer((_req, res) => {
    jwksRequests += 1;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((resolve) => jwksServer.listen(0, "127.0.0.1", resolve));
  const { port } = jwksServer.address() as AddressInfo;
  app = await startTestApp({
    config: {
      auth: {
        keys: [{ key: TEST_KEYS.default, group: "default" }],
        jwt: {
          jwksUrl: `http://127.0.0.1:${port}/.well-known/jwks.json`,
          issuer: "https://idp.example",
          audience: "image-task-sidecar",
        },
      },
    },
  });
});
afterAll(async () => {
  await app.close();
  await new Promise((resolve) => jwksServer.close(resolve));
});

function claims(group: string) {
  return new SignJWT({ group })
    .setIssuer("https://idp.example")
    .setAudience("image-task-sidecar")
    .setSubject("user-42")
    .setExpirationTime("5m");
}

function token(key: CryptoKey, group: string, kid = "k1"): Promise<string> {
  return claims(group).setProtectedHeader({ alg: "RS256", kid }).sign(key);
}

async function expectRefused(value: string) {
  const res = await fetch(`${app.baseURL}/models`, {
    headers: { authorization: `Bearer ${value}` },
  });
  expect(res.status).toBe(401);
  expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_api_key");
}

describe("JWT bearer tokens verified against a JWKS URL", () => {
  it("accepts a token signed with a published key and applies its group", async () => {
    const client = new OpenAI({
      apiKey: await token(signingKey, "chat"),
      baseURL: app.baseURL,
      maxRetries: 0,
    });
    const ids = (await client.models.list()).data.map((model) => model.id);
    expect(ids).toEqual(["gpt-4o-mini"]);
    expect(jwksRequests).toBeGreaterThan(0);
  });

  it("refuses a token signed with a key the JWKS does not publish", async () => {
    await expectRefused(await token(strangerKey, "vip"));
  });

  it("refuses HS256 keyed with the published public key (alg confusion)", async () => {
    const hmacKeys = [
      new TextEncoder().encode(publicKeyPem),
      new TextEncoder().encode(JSON.stringify(publicJwk)),
      Buffer.from(publicJwk.n as string, "base64url"),
    ];
    for (const key of hmacKeys) {
      await expectRefused(
        await claims("vip").setProtectedHeader({ alg: "HS256", kid: "k1" }).sign(key),
      );
    }
  });

  it("refuses an unsigned token (alg none) and one without exp", async () => {
    const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
    await expectRefused(
      `${part({ alg: "none", kid: "k1" })}.${part({
        group: "vip",
        sub: "x",
        iss: "https://idp.example",
        aud: "image-task-sidecar",
        exp: 9_999_999_999,
      })}.`,
    );
    const noExp = await new SignJWT({ group: "vip" })
      .setProtectedHeader({ alg: "RS256", kid: "k1" })
      .setIssuer("https://idp.example")
      .setAudience("image-task-sidecar")
      .setSubject("user-42")
      .sign(signingKey);
    await expectRefused(noExp);
  });
});
