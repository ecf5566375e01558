import type { z } from "zod";

/** What {@link checkPlaceholderSecrets} reads of a parsed configuration. */
interface WithSecrets {
  server: { urlSigningSecret?: string | undefined };
  auth: {
    keys: ReadonlyArray<{ key: string }>;
    jwt?: { secret?: string | undefined } | undefined;
    forward?: { secret?: string | undefined } | undefined;
  };
  channels: ReadonlyArray<{ apiKey?: string | undefined }>;
  webhooks: { secret?: string | undefined };
  metrics: { bearerToken?: string | undefined };
}

/**
 * The placeholders the examples (`secret.example.env`, the docs) put where a
 * secret goes: `change-me` (`changeme`, `change_me`, any case) and
 * `your-...-here` (`your-api-key-here`, `YOUR_SECRET_HERE`), as words of
 * their own (`exchange-meter` is none).
 */
const PLACEHOLDERS: ReadonlyArray<{ shape: RegExp; name: string }> = [
  { shape: /(?<![a-z])change[-_ ]?me(?![a-z])/i, name: "change-me" },
  { shape: /(?<![a-z])your[-_][a-z0-9_-]*[-_]here(?![a-z])/i, name: "your-...-here" },
];

/** The placeholder `value` contains, by its usual name; `undefined` when none. */
export function placeholderIn(value: string): string | undefined {
  return PLACEHOLDERS.find(({ shape }) => shape.test(value))?.name;
}

/**
 * Refuses a secret or key still holding an example's placeholder (client
 * keys, channel keys, the JWT, forward, URL-signing and webhook secrets, the
 * metrics token): a copied example would otherwise start with a secret every
 * reader of the repository knows. The line names the setting and the
 * placeholder, never the value.
 */
export function checkPlaceholderSecrets(config: WithSecrets, ctx: z.RefinementCtx): void {
  const check = (value: string | undefined, path: PropertyKey[]) => {
    const found = value === undefined ? undefined : placeholderIn(value);
    if (!found) return;
    ctx.addIssue({
      code: "custom",
      path,
      message: `contains an example's placeholder (${found}), which anyone can read; set a real value`,
    });
  };
  config.auth.keys.forEach(({ key }, index) => check(key, ["auth", "keys", index, "key"]));
  config.channels.forEach(({ apiKey }, index) => check(apiKey, ["channels", index, "apiKey"]));
  check(config.auth.jwt?.secret, ["auth", "jwt", "secret"]);
  check(config.auth.forward?.secret, ["auth", "forward", "secret"]);
  check(config.server.urlSigningSecret, ["server", "urlSigningSecret"]);
  check(config.webhooks.secret, ["webhooks", "secret"]);
  check(config.metrics.bearerToken, ["metrics", "bearerToken"]);
}
