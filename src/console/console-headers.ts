import type { Config } from "../config/config-schema.js";
import { presignedLinkOrigin } from "../images/open-image-store.js";

/** What the console's headers are made from. */
type ConsoleHeadersConfig = Pick<Config, "server" | "images" | "deployment">;

/**
 * The origins image links may point at besides the service's own: the
 * `server.publicBaseUrl` origin (the service's links are made on it), a
 * CDN's (`links: public`), or the bucket's (`links: presigned`, as the image
 * store presigns them: `presignedLinkOrigin`).
 */
export function imageLinkOrigins(config: ConsoleHeadersConfig): string[] {
  const origins = new Set<string>();
  if (config.server.publicBaseUrl) origins.add(new URL(config.server.publicBaseUrl).origin);
  const { images } = config;
  if (images.links === "public" && images.publicBaseUrl) {
    origins.add(new URL(images.publicBaseUrl).origin);
  }
  if (images.links === "presigned") {
    const bucket = presignedLinkOrigin(config);
    if (bucket) origins.add(bucket);
  }
  return [...origins];
}

/**
 * The Content-Security-Policy of the console's pages: scripts, styles and
 * requests to its own origin only, no inline script or style, no plugin,
 * frame, form target or `<base>`; images also from `data:` and `blob:`
 * (base64 results, previews of files picked for an edit) and from where
 * image links point ({@link imageLinkOrigins}). Trusted Types make any
 * HTML-parsing sink (`innerHTML`, ...) throw: the console only ever sets text.
 */
export function consoleContentSecurityPolicy(config: ConsoleHeadersConfig): string {
  const images = ["'self'", "data:", "blob:", ...imageLinkOrigins(config)];
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    `img-src ${images.join(" ")}`,
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "require-trusted-types-for 'script'",
    "trusted-types 'none'",
  ].join("; ");
}

/** The headers every console asset is answered with, besides its type and caching. */
export function consoleSecurityHeaders(csp: string): Record<string, string> {
  return {
    "Content-Security-Policy": csp,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
  };
}
