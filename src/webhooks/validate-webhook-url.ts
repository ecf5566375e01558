import { ServiceError } from "../errors/service-error.js";
import { shorten } from "../errors/shorten.js";
import { isIpLiteral } from "../net/ip-address.js";
import {
  assertUrlResolvesAllowed,
  ForbiddenAddressError,
  type LookupAll,
} from "../net/address-policy.js";

/** Longest `webhook_url` accepted, in characters (what browsers and proxies reliably carry). */
export const MAX_WEBHOOK_URL_LENGTH = 2048;

/** How long resolving the receiver's host name may hold a submission. */
const DEFAULT_RESOLVE_TIMEOUT_MS = 5000;

/** What {@link validateWebhookUrl} needs. */
export interface WebhookUrlOptions {
  /** The `webhooks` config section (its `secret` and `allowPrivateNetworks`). */
  webhooks: { secret?: string; allowPrivateNetworks: boolean };
  /** DNS lookup with every address; default `node:dns`. Tests pass one to fake DNS. */
  lookup?: LookupAll;
  /** Milliseconds to wait for DNS before refusing. Default 5000. */
  resolveTimeoutMs?: number;
}

/**
 * Checks a submitted `webhook_url` and returns it normalised (`new URL(...).href`),
 * or `undefined` when none was given (absent or `null`). The task route calls
 * it after parsing the body and before creating the task, and stores what it
 * returns with the task.
 *
 * Refused, each with 400 `invalid_value` and `param: "webhook_url"`:
 * - any `webhook_url` while no `webhooks.secret` is configured;
 * - anything but an absolute http(s) URL of at most 2048 characters, or one
 *   with a user name or password in it;
 * - a host that is, or resolves to, a loopback, private, link-local, reserved
 *   or metadata address (unless `webhooks.allowPrivateNetworks`; metadata and
 *   multicast stay refused even then), or that does not resolve within 5 s.
 *
 * The same guard runs again at every connect (see `createWebhookDeliverer`),
 * so a name that resolves elsewhere later (DNS rebinding) gains nothing.
 *
 * @throws ServiceError invalid_value
 */
export async function validateWebhookUrl(
  value: unknown,
  options: WebhookUrlOptions,
): Promise<string | undefined> {
  if (value === undefined || value === null) return undefined;
  if (!options.webhooks.secret) {
    throw invalid(
      "webhook_url is not accepted: this service has no webhooks.secret configured " +
        "(WEBHOOKS_SECRET sets it).",
    );
  }
  if (typeof value !== "string") throw invalid("webhook_url must be a string.");
  if (value.length > MAX_WEBHOOK_URL_LENGTH) {
    throw invalid(`webhook_url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters.`);
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid("webhook_url must be an absolute http or https URL.");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw invalid("webhook_url must be an http or https URL.");
  }
  if (url.username || url.password) {
    throw invalid("webhook_url must not contain a user name or password.");
  }
  const policy = { allowPrivateNetworks: options.webhooks.allowPrivateNetworks };
  const timeoutMs = options.resolveTimeoutMs ?? DEFAULT_RESOLVE_TIMEOUT_MS;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("timed out")), timeoutMs);
  });
  try {
    await Promise.race([assertUrlResolvesAllowed(url, policy, options.lookup), deadline]);
  } catch (err) {
    if (err instanceof ForbiddenAddressError) {
      throw invalid(
        `webhook_url is refused: ${refusedAddress(url, err)} Webhooks are not sent to loopback, private, ` +
          `link-local or metadata networks.${allowedBy(err)}`,
      );
    }
    throw invalid(`webhook_url's host ${shorten(url.hostname)} could not be resolved.`);
  } finally {
    clearTimeout(timer);
  }
  return url.href;
}

/**
 * What a refusal tells the caller: the kind of address the host is or
 * resolves to, never the address, so a key holder cannot map internal names.
 */
function refusedAddress(url: URL, err: ForbiddenAddressError): string {
  const kind = `${/^[aeiou]/.test(err.reason) ? "an" : "a"} ${err.reason} address`;
  return isIpLiteral(url.hostname)
    ? `its host is ${kind}.`
    : `its host ${shorten(url.hostname)} resolves to ${kind}.`;
}

/** The setting that would let the refused address through, where one would. */
function allowedBy(err: ForbiddenAddressError): string {
  if (err.reason === "metadata" || err.reason === "multicast" || err.reason === "scheme") return "";
  return (
    " To deliver to receivers on your own network, set webhooks.allowPrivateNetworks: true, " +
    "or WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true."
  );
}

function invalid(message: string): ServiceError {
  return new ServiceError("invalid_value", message, { param: "webhook_url" });
}
