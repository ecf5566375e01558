import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { clientAddressOf, clientKeyOf } from "../../src/net/client-address.js";

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

describe("clientKeyOf", () => {
  it("counts an IPv4 address alone and an IPv6 one by its /64", () => {
    expect(clientKeyOf("203.0.113.9")).toBe("203.0.113.9");
    expect(clientKeyOf("2001:db8:1:2::1")).toBe(clientKeyOf("2001:db8:1:2:ffff::9"));
    expect(clientKeyOf("2001:db8:1:2::1")).not.toBe(clientKeyOf("2001:db8:1:3::1"));
    expect(clientKeyOf("2001:db8:1:2::1")).toBe("20010db800010002::/64");
  });
});
