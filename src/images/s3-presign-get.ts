import type { PresignOptions } from "./image-store.js";
import { signableRequest, type S3Target } from "./s3-target.js";

/**
 * A presigned `GET` link to an object (its key as the store addresses it),
 * signed by the SDK's SigV4 signer on the target the SDK resolved, as the
 * SDK's presigner signs one (the payload unsigned, only `host` signed), but
 * without its per-call pipeline: through the SDK a link cost ~1.2 ms of CPU,
 * paid on every poll that shows a finished task's presigned links.
 */
export async function presignGet(
  target: S3Target,
  objectKey: string,
  options: PresignOptions,
): Promise<string> {
  const request = signableRequest(target, "GET", objectKey);
  const signed = await target.signer.presign(request, {
    expiresIn: options.expiresInSec,
    signingDate: options.signingDate,
  });
  return `${target.protocol}//${target.host}${request.path}?${queryString(signed.query ?? {})}`;
}

/** The query as the signer canonicalized it: keys sorted, each part escaped as RFC 3986 says. */
function queryString(query: Record<string, string | string[] | null | undefined>): string {
  const parts: string[] = [];
  for (const key of Object.keys(query).sort()) {
    const value = query[key];
    for (const item of Array.isArray(value) ? value : [value]) {
      parts.push(item == null ? escape(key) : `${escape(key)}=${escape(item)}`);
    }
  }
  return parts.join("&");
}

const escape = (text: string) =>
  encodeURIComponent(text).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
