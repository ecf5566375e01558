import { CREDENTIAL_PARAM } from "./redact-url.js";

/**
 * Field names whose string values are credentials, in any section, present
 * or future: `apiKey`, `key`, `secret`, `bearerToken`, `urlSigningSecret`,
 * `secretAccessKey`, `accessKeyId`, `password`, `sessionToken`, ...
 */
const SECRET_NAME = /key|secret|token|password|passwd|credential/i;

/** Values shorter than this are too weak to be anyone's secret, and too common to mask. */
const MIN_SECRET_LENGTH = 8;

/** What masks a secret in a line. */
export const SCRUBBED = "[redacted]";

/**
 * Every credential a configuration holds, found by shape rather than by a
 * list of places, so a section added later is covered without a change here:
 * string values of fields named like a credential (at any depth, in arrays
 * too), and the user name and password of every URL and the values of its
 * query parameters named like a credential (`?password=`, `?access_key=`),
 * both as written and decoded.
 */
export function configSecrets(config: unknown): string[] {
  const found = new Set<string>();
  const visit = (value: unknown, name: string) => {
    if (typeof value === "string") {
      if (SECRET_NAME.test(name)) found.add(value);
      for (const credential of urlCredentials(value)) found.add(credential);
    } else if (Array.isArray(value)) {
      for (const item of value) visit(item, name);
    } else if (value && typeof value === "object") {
      for (const [key, item] of Object.entries(value)) visit(item, key);
    }
  };
  visit(config, "");
  return [...found].filter((secret) => secret.length >= MIN_SECRET_LENGTH);
}

/**
 * The credentials in the environment, by the same rules: variables named like
 * one (`AWS_SECRET_ACCESS_KEY`, `UPSTREAM_KEY`, `REDIS_PASSWORD`) and those
 * of URLs (`REDIS_URL=redis://:pw@host`).
 */
export function envSecrets(env: NodeJS.ProcessEnv): string[] {
  const found = new Set<string>();
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (SECRET_ENV_NAME.test(name)) found.add(value);
    for (const credential of urlCredentials(value)) found.add(credential);
  }
  return [...found].filter((secret) => secret.length >= MIN_SECRET_LENGTH);
}

/** A variable named like a credential, as a whole word: not `npm_package_keywords_0`. */
const SECRET_ENV_NAME = /(^|_)(KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIALS?)(_|$)/i;

/**
 * The credentials of `text` when it is a URL that has some: its user name and
 * password, and the values of its query parameters named like a credential
 * (`?password=`, `?access_key=`); else nothing.
 */
function urlCredentials(text: string): string[] {
  const url = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)([^#]*)/i.exec(text);
  if (!url) return [];
  const [, authority = "", rest = ""] = url;
  const found: string[] = [];
  const keep = (raw: string, plusIsSpace: boolean) => {
    if (raw !== "") found.push(raw, decoded(raw, plusIsSpace));
  };
  // Read by hand, not by URL: the several-host forms (`redis+sentinel://:pw@h1,h2/m`) are not
  // URLs WHATWG's parser takes.
  const at = authority.lastIndexOf("@");
  if (at >= 0) {
    const userinfo = authority.slice(0, at);
    const colon = userinfo.indexOf(":");
    keep(colon < 0 ? userinfo : userinfo.slice(0, colon), false);
    if (colon >= 0) keep(userinfo.slice(colon + 1), false);
  }
  const mark = rest.indexOf("?");
  if (mark >= 0) {
    for (const pair of rest.slice(mark + 1).split("&")) {
      const equals = pair.indexOf("=");
      if (equals > 0 && CREDENTIAL_PARAM.test(decoded(pair.slice(0, equals), true))) {
        keep(pair.slice(equals + 1), true);
      }
    }
  }
  return found;
}

/** `text` percent-decoded (in a query `+` is a space too), as written if it cannot be. */
function decoded(text: string, plusIsSpace: boolean): string {
  try {
    return decodeURIComponent(plusIsSpace ? text.replaceAll("+", " ") : text);
  } catch {
    return text;
  }
}

/**
 * Replaces every occurrence of a secret in a text with `[redacted]`: the last
 * line of defence under the log redaction and the code's own care, for
 * whatever message (a library's error, a URL in an exception) would carry a
 * credential from the configuration out. Each secret is also searched for as
 * JSON escapes it, since log lines are JSON.
 */
export function createSecretScrubber(secrets: readonly string[]): (text: string) => string {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (secret.length < MIN_SECRET_LENGTH) continue;
    forms.add(secret);
    forms.add(JSON.stringify(secret).slice(1, -1));
  }
  if (forms.size === 0) return (text) => text;
  // Longest first, so a secret that contains another is masked whole.
  const pattern = new RegExp(
    [...forms]
      .sort((a, b) => b.length - a.length)
      .map((form) => form.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      .join("|"),
    "g",
  );
  return (text) => text.replace(pattern, SCRUBBED);
}
