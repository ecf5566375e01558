import type { IncomingMessage } from "node:http";
import type { Config } from "../config/config-schema.js";
import { ServiceError } from "../errors/service-error.js";
import { clientAddressOf } from "../net/client-address.js";
import type { ForwardAuthenticate } from "./forward-authenticator.js";
import { createJwtVerifier, looksLikeJwt } from "./jwt-verifier.js";
import type { Principal } from "./principal.js";
import { createStaticKeyLookup } from "./static-keys.js";

/**
 * Resolves a bearer token to a principal, or `undefined` when it is not valid.
 * May throw an `ServiceError` when validity cannot be decided (forward mode's
 * gateway unreachable), which the caller passes on as it is. `req` is the
 * request the token came with: forward mode bounds its checks of new keys
 * per client address.
 */
export type Authenticate = ((
  token: string,
  req?: IncomingMessage,
) => Promise<Principal | undefined>) & {
  /**
   * The principal of a configured key, found at once; `undefined` for any
   * other token (which {@link Authenticate} itself then decides).
   */
  configured?: (token: string) => Principal | undefined;
};

/**
 * Configured keys first, then (for JWT-shaped tokens, when JWT is configured)
 * the JWT verifier, then (with `auth.forward`) the gateway. A JWT-shaped
 * token that fails verification is refused, not sent to the gateway: a token
 * meant for this service must not leak to another.
 */
export function createAuthenticate(config: Config, forward?: ForwardAuthenticate): Authenticate {
  const lookup = createStaticKeyLookup(config.auth.keys);
  const verifyJwt = config.auth.jwt ? createJwtVerifier(config.auth.jwt, config.groups) : undefined;
  const { trustProxy } = config.server;
  const authenticate: Authenticate = async (token, req) => {
    const principal = lookup(token);
    if (principal) return principal;
    if (verifyJwt && looksLikeJwt(token)) return verifyJwt(token);
    if (forward) return forward(token, req ? clientAddressOf(req, trustProxy) : undefined);
    return undefined;
  };
  authenticate.configured = lookup;
  return authenticate;
}

/** The token of an `Authorization: Bearer <token>` header, or `undefined` when it has none. */
export function bearerToken(header: string | undefined): string | undefined {
  return header ? BEARER.exec(header)?.[1] : undefined;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * `Authorization: Bearer <key or JWT>` to a principal.
 * @throws ServiceError `missing_api_key` or `invalid_api_key`, or what the
 *   authenticator threw (`upstream_unavailable` in forward mode)
 */
export async function authenticateHeader(
  authenticate: Authenticate,
  header: string | undefined,
  req?: IncomingMessage,
): Promise<Principal> {
  const token = bearerToken(header);
  if (!header || (token === undefined && header.trim() === "")) {
    throw new ServiceError(
      "missing_api_key",
      "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'.",
    );
  }
  const principal = token === undefined ? undefined : await authenticate(token, req);
  if (!principal) {
    throw new ServiceError("invalid_api_key", "Incorrect API key provided.");
  }
  return principal;
}
