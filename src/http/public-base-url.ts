import type { Request } from "express";

/**
 * The origin clients reach the service at: `server.publicBaseUrl` when set
 * (behind a CDN or ingress that rewrites hosts), else the request's own
 * protocol and Host (honouring `X-Forwarded-*` only with `trustProxy`).
 */
export function publicBaseUrl(req: Request, configured: string | undefined): string {
  if (configured) return configured.replace(/\/+$/, "");
  return `${req.protocol}://${req.get("host") ?? "localhost"}`;
}
