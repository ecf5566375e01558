import type { ModelInfo } from "../channels/channel-registry.js";
import type { UpstreamCredential } from "./upstream-credential.js";

/**
 * Who is calling. Tasks are owned by `subject`. Which models it may use is
 * decided by `ModelAccess` (src/models/model-access.ts): its group's patterns,
 * or, for a forward key, the list its gateway answered, in `upstream`.
 */
export interface Principal {
  /**
   * Stable owner id, never a raw key: `key:<sha256 prefix>` (configured keys),
   * `jwt:<iss>:<sub>`, or `fwd:<HMAC prefix>` (forward keys).
   */
  subject: string;
  /**
   * The configured group whose model patterns apply, or {@link FORWARD_GROUP}
   * for forward keys. A bounded value: safe as a metric label.
   */
  group: string;
  /**
   * Who it is in logs and traces (`key_name`), never a key: a configured key's
   * `name`, else `key_` and the first 12 hex characters of the key's SHA-256;
   * a JWT's `sub`; a forward key's fingerprint, as a configured key's.
   */
  keyName: string;
  /** Forward keys only: the gateway they are bound to and the key to send it. */
  upstream?: ForwardUpstream;
  /** A configured key's `webhookUrl`: where its background responses' events go. */
  webhookUrl?: string;
}

/**
 * The caller as a metric label: a configured key's `key_name` (a set the
 * configuration bounds), else `other` (JWT subjects and forward keys are
 * unbounded).
 */
export function keyLabelOf(caller: { subject: string; keyName?: string | undefined }): string {
  return caller.subject.startsWith("key:") && caller.keyName ? caller.keyName : "other";
}

/** The group label of every forward principal: one value, whatever the key. */
export const FORWARD_GROUP = "forward";

/** A forward principal's binding to its gateway (`auth.forward.channel`). */
export interface ForwardUpstream {
  /** Name of the one channel its calls go to. */
  channel: string;
  /** The client's own key, sent upstream in place of the channel's. */
  credential: UpstreamCredential;
  /** What the gateway listed for this key: the models it may see and use. */
  models: GatewayModels;
}

/** A gateway's model list for one key: sorted by id, no duplicates. */
export interface GatewayModels {
  readonly ids: ReadonlySet<string>;
  readonly list: readonly ModelInfo[];
}
