import type { Response } from "express";
import { AppError } from "../http/app-error.js";

/**
 * Who is calling. Tasks are owned by `subject`; `group` decides the models.
 * Kept general so a forward mode (the client's own key passed upstream,
 * the gateway deciding models) is one more authenticator, not a rewrite.
 */
export interface Principal {
  /** Stable owner id: `key:<sha256 prefix>` or `jwt:<iss>:<sub>`; never a raw key. */
  subject: string;
  /** The group whose model patterns apply. */
  group: string;
  /** A human label for logs (the key's `name`, or the JWT `sub`). */
  label: string;
}

/** The principal the auth middleware attached; a route behind it always has one. */
export function getPrincipal(res: Response): Principal {
  const principal = res.locals.principal as Principal | undefined;
  if (!principal) throw new AppError("missing_api_key", "You didn't provide an API key.");
  return principal;
}
