import type { Config } from "../config/config-schema.js";

/**
 * One line saying how bearer tokens are accepted, for `check-config` and the
 * banner, e.g. `auth: 2 keys, JWT (HS256), forward: unknown bearer keys are
 * checked against channel "newapi" (GET /v1/models, cached 60 s, refusals 5 s)`.
 * Names no key, secret or URL.
 */
export function describeAuth(auth: Config["auth"]): string {
  const count = auth.keys.length;
  const parts = [`${count} ${count === 1 ? "key" : "keys"}`];
  if (auth.jwt) parts.push(auth.jwt.secret !== undefined ? "JWT (HS256)" : "JWT (JWKS)");
  const { forward } = auth;
  if (forward) {
    parts.push(
      `forward: unknown bearer keys are checked against channel "${forward.channel}" ` +
        `(GET /v1/models, cached ${forward.cacheSec} s, refusals ${forward.refusalCacheSec} s)`,
    );
  } else if (count === 0 && !auth.jwt) {
    parts.push("every request is refused");
  }
  return `auth: ${parts.join(", ")}`;
}
