import type { JWTVerifyGetKey } from "jose";
import type { Config } from "../config/config-schema.js";
import type { Principal } from "./principal.js";

type JwtConfig = NonNullable<Config["auth"]["jwt"]>;

/** A compact JWS: three base64url parts, the header a JSON object. */
export function looksLikeJwt(token: string): boolean {
  return /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
}

/**
 * What a JWKS may verify: public-key algorithms only, so a key set that also
 * published a symmetric key could still not be used to forge tokens with it.
 */
const ASYMMETRIC_ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
];

/**
 * Verifies bearer JWTs (HS256 secret or a JWKS URL) and maps them to a
 * principal. Resolves `undefined` for any bad, expired, `exp`-less (unless
 * `requireExp: false`) or group-less token: the caller answers all of them
 * alike with `invalid_api_key`. With a secret only HS256 verifies; with a
 * JWKS only the asymmetric keys it publishes do, so no token can pick its
 * own algorithm (`none`, or HS256 keyed with a public key).
 */
export function createJwtVerifier(
  jwt: JwtConfig,
  groups: Config["groups"],
): (token: string) => Promise<Principal | undefined> {
  // jose is loaded with the first token, not at start-up: most deployments use static keys only.
  let verifying: Promise<(token: string) => Promise<Principal | undefined>> | undefined;
  return async (token) => {
    // Fail closed: an empty secret (unset variable) must not verify anything.
    if (jwt.secret === "") return undefined;
    verifying ??= loadVerifier(jwt, groups);
    return (await verifying)(token);
  };
}

async function loadVerifier(
  jwt: JwtConfig,
  groups: Config["groups"],
): Promise<(token: string) => Promise<Principal | undefined>> {
  const { createRemoteJWKSet, jwtVerify } = await import("jose");
  const key: Uint8Array | JWTVerifyGetKey =
    jwt.secret !== undefined
      ? new TextEncoder().encode(jwt.secret)
      : createRemoteJWKSet(new URL(jwt.jwksUrl as string));
  const algorithms = jwt.secret !== undefined ? ["HS256"] : ASYMMETRIC_ALGORITHMS;
  return async (token) => {
    try {
      const { payload } = await jwtVerify(token, key as Uint8Array, {
        issuer: jwt.issuer,
        audience: jwt.audience,
        algorithms,
        requiredClaims: jwt.requireExp ? ["exp"] : [],
      });
      const claim = Object.hasOwn(payload, jwt.groupClaim) ? payload[jwt.groupClaim] : undefined;
      const group = typeof claim === "string" ? claim : jwt.defaultGroup;
      // Own keys only: a group named "__proto__" or "constructor" must not find Object's.
      if (!group || !Object.hasOwn(groups, group)) return undefined;
      if (typeof payload.sub !== "string" || !payload.sub) return undefined;
      return { subject: `jwt:${payload.iss ?? ""}:${payload.sub}`, group, keyName: payload.sub };
    } catch {
      return undefined;
    }
  };
}
