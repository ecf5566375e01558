import { createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from "jose";
import type { Config } from "../config/config-schema.js";
import type { Principal } from "./principal.js";

type JwtConfig = NonNullable<Config["auth"]["jwt"]>;

/** A compact JWS: three base64url parts, the header a JSON object. */
export function looksLikeJwt(token: string): boolean {
  return /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
}

/**
 * Verifies bearer JWTs (HS256 secret or a JWKS URL) and maps them to a
 * principal. Resolves `undefined` for any bad, expired or group-less token:
 * the caller answers all of them alike with `invalid_api_key`.
 */
export function createJwtVerifier(
  jwt: JwtConfig,
  groups: Config["groups"],
): (token: string) => Promise<Principal | undefined> {
  const key: Uint8Array | JWTVerifyGetKey =
    jwt.secret !== undefined
      ? new TextEncoder().encode(jwt.secret)
      : createRemoteJWKSet(new URL(jwt.jwksUrl as string));
  const algorithms = jwt.secret !== undefined ? ["HS256"] : undefined;
  return async (token) => {
    // Fail closed: an empty secret (unset variable) must not verify anything.
    if (jwt.secret === "") return undefined;
    try {
      const { payload } = await jwtVerify(token, key as Uint8Array, {
        issuer: jwt.issuer,
        audience: jwt.audience,
        algorithms,
      });
      const claim = payload[jwt.groupClaim];
      const group = typeof claim === "string" ? claim : jwt.defaultGroup;
      if (!group || !groups[group] || typeof payload.sub !== "string" || !payload.sub) {
        return undefined;
      }
      return { subject: `jwt:${payload.iss ?? ""}:${payload.sub}`, group, label: payload.sub };
    } catch {
      return undefined;
    }
  };
}
