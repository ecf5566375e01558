import { randomBytes } from "node:crypto";
import type { LookupAddress } from "node:dns";
import { describe, expect, it } from "vitest";
import { ServiceError } from "../../src/errors/service-error.js";
import { errorResponse } from "../../src/http/send-error.js";
import type { LookupAll } from "../../src/net/address-policy.js";
import { validateWebhookUrl } from "../../src/webhooks/validate-webhook-url.js";

const SECRET = `whsec_${randomBytes(24).toString("base64")}`;
const CLOSED = { secret: SECRET, allowPrivateNetworks: false };
const OPEN = { secret: SECRET, allowPrivateNetworks: true };

/** A DNS that answers these addresses for every name, and records what was asked. */
function dns(...addresses: string[]): LookupAll & { asked: string[] } {
  const asked: string[] = [];
  const lookup = async (hostname: string): Promise<LookupAddress[]> => {
    asked.push(hostname);
    return addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  return Object.assign(lookup, { asked });
}

/** A DNS that must not be asked: IP literals are judged as they are. */
const noDns: LookupAll = async (hostname) => {
  throw new Error(`DNS asked for ${hostname}`);
};

/** The 400 a submission gets, as the error writer would send it. */
async function refusal(
  value: unknown,
  webhooks: { secret?: string; allowPrivateNetworks: boolean },
  lookup: LookupAll = noDns,
) {
  try {
    await validateWebhookUrl(value, { webhooks, lookup, resolveTimeoutMs: 200 });
  } catch (err) {
    expect(err).toBeInstanceOf(ServiceError);
    const error = err as ServiceError;
    expect(errorResponse(error).status).toBe(400);
    expect(errorResponse(error).body.error).toMatchObject({
      code: "invalid_value",
      param: "webhook_url",
    });
    return error.message;
  }
  throw new Error(`expected ${String(value)} to be refused`);
}

describe("validateWebhookUrl", () => {
  it("no webhook_url (absent or null) is no webhook", async () => {
    expect(await validateWebhookUrl(undefined, { webhooks: CLOSED })).toBeUndefined();
    expect(await validateWebhookUrl(null, { webhooks: { allowPrivateNetworks: false } })).toBe(
      undefined,
    );
  });

  it("refuses any webhook_url while no webhooks.secret is configured", async () => {
    const lookup = dns("93.184.216.34");
    expect(
      await refusal("https://hooks.example.com/x", { allowPrivateNetworks: true }, lookup),
    ).toMatch(/webhooks\.secret/);
    expect(lookup.asked).toEqual([]);
  });

  it("accepts a public http(s) URL and returns it normalised", async () => {
    const lookup = dns("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946");
    const url = await validateWebhookUrl("HTTPS://Hooks.Example.com:443/in?x=1", {
      webhooks: CLOSED,
      lookup,
    });
    expect(url).toBe("https://hooks.example.com/in?x=1");
    expect(lookup.asked).toEqual(["hooks.example.com"]);
  });

  it("refuses what is not an http(s) URL, or carries credentials, or is too long", async () => {
    const lookup = dns("93.184.216.34");
    for (const bad of [
      42,
      { url: "https://hooks.example.com" },
      "",
      "hooks.example.com/in",
      "/relative",
      "ftp://hooks.example.com/",
      "file:///etc/passwd",
      "javascript:alert(1)",
      "https://user:pw@hooks.example.com/",
      `https://hooks.example.com/${"a".repeat(2048)}`,
    ]) {
      expect(await refusal(bad, CLOSED, lookup), JSON.stringify(bad)).toMatch(/webhook_url/);
    }
  });

  it("refuses loopback, private, link-local and metadata literals in any spelling, without DNS", async () => {
    for (const host of [
      "127.0.0.1",
      "127.1",
      "2130706433",
      "0x7f.0.0.1",
      "0177.0.0.1",
      "[::1]",
      "[::ffff:127.0.0.1]",
      "0.0.0.0",
      "10.0.0.5",
      "172.16.3.4",
      "192.168.1.1",
      "100.64.0.1",
      "[fd12::1]",
      "169.254.10.10",
      "[fe80::1]",
      "169.254.169.254",
      "[fd00:ec2::254]",
    ]) {
      expect(await refusal(`http://${host}/hook`, CLOSED), host).toMatch(
        /loopback|private|link-local|metadata|unspecified/,
      );
    }
  });

  it("refuses a host name that resolves to 127.0.0.1, saying what kind of address, never which", async () => {
    const lookup = dns("127.0.0.1");
    const message = await refusal("https://hooks.example.com/in", CLOSED, lookup);
    expect(message).toContain("hooks.example.com resolves to a loopback address");
    expect(message).not.toContain("127.0.0.1");
    expect(lookup.asked).toEqual(["hooks.example.com"]);
    const internal = await refusal("https://db.internal/", CLOSED, dns("10.20.30.40"));
    expect(internal).toContain("resolves to a private address");
    expect(internal).not.toMatch(/10\.20/);
  });

  it("refuses a name with one private address among public ones", async () => {
    expect(
      await refusal("https://hooks.example.com/", CLOSED, dns("93.184.216.34", "10.1.2.3")),
    ).toContain("private");
  });

  it("with allowPrivateNetworks accepts loopback and private receivers", async () => {
    expect(await validateWebhookUrl("http://127.0.0.1:9000/h", { webhooks: OPEN })).toBe(
      "http://127.0.0.1:9000/h",
    );
    expect(
      await validateWebhookUrl("http://receiver.internal/h", {
        webhooks: OPEN,
        lookup: dns("10.0.0.7"),
      }),
    ).toBe("http://receiver.internal/h");
  });

  it("names the setting that allows loopback and private receivers, and the variable for the secret", async () => {
    const hint =
      "set webhooks.allowPrivateNetworks: true, or WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true.";
    expect(await refusal("http://127.0.0.1:9000/h", CLOSED)).toContain(hint);
    expect(await refusal("https://hooks.example.com/", CLOSED, dns("10.1.2.3"))).toContain(hint);
    // Metadata stays refused whatever is set: no setting is offered.
    const metadata = await refusal("http://169.254.169.254/latest/meta-data/", CLOSED);
    expect(metadata).toContain("metadata");
    expect(metadata).not.toContain("allowPrivateNetworks");
    expect(
      await refusal("https://hooks.example.com/", { allowPrivateNetworks: false }, dns("1.1.1.1")),
    ).toContain("no webhooks.secret configured (WEBHOOKS_SECRET sets it)");
  });

  it("keeps cloud metadata refused even with allowPrivateNetworks", async () => {
    expect(await refusal("http://169.254.169.254/latest/meta-data/", OPEN)).toContain("metadata");
    expect(await refusal("http://md.example/", OPEN, dns("fd00:ec2::254"))).toContain("metadata");
  });

  it("refuses a name that does not resolve, or not in time", async () => {
    const notFound: LookupAll = async () => {
      throw Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" });
    };
    expect(await refusal("https://nowhere.example/", CLOSED, notFound)).toContain(
      "could not be resolved",
    );
    const never: LookupAll = () => new Promise(() => undefined);
    expect(await refusal("https://slow-dns.example/", CLOSED, never)).toContain(
      "could not be resolved",
    );
  });

  it("echoes a long host name shortened, as every value an error message echoes", async () => {
    // Under the URL's 2,048-character cap: 24 labels of 63 letters.
    const host = `${Array.from({ length: 24 }, (_, i) => String.fromCharCode(97 + i).repeat(63)).join(".")}.example`;
    const notFound: LookupAll = async () => {
      throw Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" });
    };
    for (const message of [
      await refusal(`https://${host}/`, CLOSED, notFound),
      await refusal(`https://${host}/`, CLOSED, dns("127.0.0.1")),
    ]) {
      expect(message).toContain(`${"a".repeat(63)}.${"b".repeat(35)}…`);
      expect(message).not.toContain("c".repeat(63));
      expect(message.length).toBeLessThan(400);
    }
  });
});
