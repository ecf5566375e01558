import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { clientAddressOf, clientKeyOf, isFromTrustedProxy } from "../../src/net/client-address.js";
import { trustedProxiesOf, trustProxyEntryProblem } from "../../src/net/trusted-proxies.js";

/** A request as Node hands it over: its headers and its socket's peer. */
const request = (remoteAddress: string, forwardedFor?: string | string[]) =>
  ({
    headers: forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor },
    socket: { remoteAddress },
  }) as unknown as IncomingMessage;

describe("clientAddressOf", () => {
  it("is the socket's peer without trustProxy, whatever X-Forwarded-For says", () => {
    expect(clientAddressOf(request("::ffff:198.51.100.7", "203.0.113.9"), false)).toBe(
      "198.51.100.7",
    );
  });

  it("with trustProxy is the last X-Forwarded-For entry: what the nearest proxy appended", () => {
    const proxy = "10.0.0.2";
    expect(clientAddressOf(request(proxy, "203.0.113.9"), true)).toBe("203.0.113.9");
    expect(clientAddressOf(request(proxy, "1.1.1.1, 203.0.113.9"), true)).toBe("203.0.113.9");
    expect(clientAddressOf(request(proxy, ["1.1.1.1", "203.0.113.9 "]), true)).toBe("203.0.113.9");
    expect(clientAddressOf(request(proxy, "203.0.113.9:41234"), true)).toBe("203.0.113.9");
    expect(clientAddressOf(request(proxy, "[2001:db8::1]:41234"), true)).toBe("2001:db8::1");
    expect(clientAddressOf(request(proxy, "::ffff:203.0.113.9"), true)).toBe("203.0.113.9");
    // Nothing an address can be read from: the proxy's own.
    for (const junk of ["unknown", "", "203.0.113.9, _hidden", "999.1.1.1"]) {
      expect(clientAddressOf(request(proxy, junk), true), junk).toBe(proxy);
    }
    expect(clientAddressOf(request(proxy), true)).toBe(proxy);
  });
});

describe("clientAddressOf with the proxies named", () => {
  it("reads X-Forwarded-For only from a peer trustProxy names", () => {
    // `true` is loopback and private networks: a public peer is a client, whatever it sends.
    expect(clientAddressOf(request("198.51.100.7", "9.9.9.9"), true)).toBe("198.51.100.7");
    expect(clientAddressOf(request("::ffff:127.0.0.1", "9.9.9.9"), true)).toBe("9.9.9.9");
    const proxies = ["10.1.0.0/16", "2001:db8::/32"];
    expect(clientAddressOf(request("10.2.0.1", "9.9.9.9"), proxies)).toBe("10.2.0.1");
    expect(clientAddressOf(request("10.1.2.3", "9.9.9.9"), proxies)).toBe("9.9.9.9");
    expect(clientAddressOf(request("2001:db8::5", "9.9.9.9"), proxies)).toBe("9.9.9.9");
    expect(isFromTrustedProxy(request("10.1.2.3"), proxies)).toBe(true);
    expect(isFromTrustedProxy(request("10.2.0.1"), proxies)).toBe(false);
    expect(isFromTrustedProxy(request("127.0.0.1"), false)).toBe(false);
    expect(isFromTrustedProxy(request("127.0.0.1"), [])).toBe(false);
  });

  it("walks from the right, skipping trusted hops: the first untrusted entry is the client", () => {
    const proxies = ["10.0.0.0/8"];
    const behind = (forwardedFor: string) =>
      clientAddressOf(request("10.0.0.1", forwardedFor), proxies);
    // What the client wrote before the proxies' entries counts for nothing.
    expect(behind("1.1.1.1, 9.9.9.9")).toBe("9.9.9.9");
    expect(behind("9.9.9.9, 1.1.1.1")).toBe("1.1.1.1");
    expect(behind("6.6.6.6, 203.0.113.9, 10.0.0.7, 10.0.0.8")).toBe("203.0.113.9");
    // Every hop trusted: the furthest one.
    expect(behind("10.0.0.9, 10.0.0.7")).toBe("10.0.0.9");
    // An entry that is no address ends the walk at the trusted hop that passed it on.
    expect(behind("9.9.9.9, junk, 10.0.0.7")).toBe("10.0.0.7");
  });

  it("takes addresses and CIDRs, and names what it cannot read", () => {
    const proxies = trustedProxiesOf(["192.168.1.0/24", "fd00::/8", "203.0.113.9"]);
    expect(proxies.any).toBe(true);
    expect(proxies.trusts("192.168.1.77")).toBe(true);
    expect(proxies.trusts("192.168.2.1")).toBe(false);
    expect(proxies.trusts("fd12::1")).toBe(true);
    expect(proxies.trusts("203.0.113.9")).toBe(true);
    expect(proxies.trusts("not an address")).toBe(false);
    expect(trustedProxiesOf(false).any).toBe(false);
    expect(trustedProxiesOf(true).trusts("172.20.1.1")).toBe(true);
    expect(trustedProxiesOf(true).trusts("8.8.8.8")).toBe(false);
    expect(trustProxyEntryProblem("10.0.0.0/8")).toBeUndefined();
    expect(trustProxyEntryProblem("::1")).toBeUndefined();
    for (const bad of ["10.0.0.0/33", "proxy.internal", "10.0.0/8", "::1/129", "10.0.0.0/"]) {
      expect(trustProxyEntryProblem(bad), bad).toMatch(/is not an IP address or CIDR/);
    }
  });
});

describe("clientKeyOf", () => {
  it("counts an IPv4 address alone and an IPv6 one by its /64", () => {
    expect(clientKeyOf("203.0.113.9")).toBe("203.0.113.9");
    expect(clientKeyOf("2001:db8:1:2::1")).toBe(clientKeyOf("2001:db8:1:2:ffff::9"));
    expect(clientKeyOf("2001:db8:1:2::1")).not.toBe(clientKeyOf("2001:db8:1:3::1"));
    expect(clientKeyOf("2001:db8:1:2::1")).toBe("20010db800010002::/64");
  });
});
