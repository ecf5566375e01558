import { describe, expect, it } from "vitest";
import {
  assertUrlAllowed,
  assertUrlResolvesAllowed,
  ForbiddenAddressError,
  refusedAddressReason,
} from "../../src/net/address-policy.js";
import { classifyAddress } from "../../src/net/ip-address.js";

describe("classifyAddress", () => {
  const refused: Array<[string, string]> = [
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["10.0.0.1", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "private"],
    ["169.254.0.1", "link-local"],
    ["169.254.169.254", "metadata"],
    ["169.254.170.2", "metadata"],
    ["100.100.100.200", "metadata"],
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["255.255.255.255", "reserved"],
    ["240.0.0.1", "reserved"],
    ["192.0.2.1", "reserved"],
    ["198.18.0.1", "reserved"],
    ["::", "unspecified"],
    ["::1", "loopback"],
    ["[::1]", "loopback"],
    ["0:0:0:0:0:0:0:1", "loopback"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["[::ffff:a9fe:a9fe]", "metadata"],
    ["::ffff:10.1.2.3", "private"],
    ["::127.0.0.1", "loopback"],
    ["64:ff9b::a9fe:a9fe", "metadata"],
    ["64:ff9b::7f00:1", "loopback"],
    ["64:ff9b:1::1", "private"],
    ["2002:7f00:1::", "loopback"],
    ["2002:c0a8:101::1", "private"],
    ["fd00::1", "private"],
    ["fd12:3456:789a::1", "private"],
    ["fc00::1", "private"],
    ["fd00:ec2::254", "metadata"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["febf::1", "link-local"],
    ["fec0::1", "private"],
    ["ff02::1", "multicast"],
    ["2001::1", "reserved"], // Teredo
    ["2001:db8::1", "reserved"],
    ["100::1", "reserved"],
    ["not an address", "reserved"],
    ["", "reserved"],
  ];
  for (const [ip, reason] of refused) {
    it(`refuses ${ip || "(empty)"} as ${reason}`, () => {
      expect(classifyAddress(ip)).toBe(reason);
    });
  }

  for (const ip of [
    "8.8.8.8",
    "1.1.1.1",
    "172.15.255.255",
    "172.32.0.1",
    "100.63.255.255",
    "100.128.0.1",
    "169.253.255.255",
    "192.169.0.1",
    "223.255.255.255",
    "2606:4700:4700::1111",
    "2a00:1450:4001:80b::200e",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
  ]) {
    it(`accepts the public address ${ip}`, () => {
      expect(classifyAddress(ip)).toBeUndefined();
    });
  }
});

describe("refusedAddressReason with allowPrivateNetworks", () => {
  it("lets loopback, private and link-local through, never metadata or multicast", () => {
    const allow = { allowPrivateNetworks: true };
    for (const ip of ["127.0.0.1", "::1", "10.0.0.1", "fd00::1", "169.254.1.1", "0.0.0.0"]) {
      expect(refusedAddressReason(ip, allow), ip).toBeUndefined();
    }
    expect(refusedAddressReason("169.254.169.254", allow)).toBe("metadata");
    expect(refusedAddressReason("::ffff:169.254.169.254", allow)).toBe("metadata");
    expect(refusedAddressReason("224.0.0.1", allow)).toBe("multicast");
    expect(refusedAddressReason("127.0.0.1")).toBe("loopback");
  });
});

describe("assertUrlAllowed", () => {
  // Every spelling a URL parser turns into a loopback, private or metadata address.
  const refused = [
    "http://127.0.0.1/",
    "http://127.1/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0x7f.0.0.1/",
    "http://0177.0.0.1/",
    "http://017700000001/",
    "http://127.0.0.1.:8080/",
    "http://0/",
    "http://0.0.0.0:9000/metrics",
    "http://[::1]:8080/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[0:0:0:0:0:ffff:a9fe:a9fe]/latest/meta-data/",
    "http://169.254.169.254/latest/meta-data/",
    "http://2852039166/", // 169.254.169.254 as one number
    "http://0xa9.0xfe.0xa9.0xfe/",
    "http://[fd00:ec2::254]/",
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "https://10.0.0.1/",
    "https://user:pass@192.168.0.1/",
    "ftp://example.com/",
    "file:///etc/passwd",
    "gopher://example.com/",
  ];
  for (const text of refused) {
    it(`refuses ${text}`, () => {
      expect(() => assertUrlAllowed(new URL(text))).toThrow(ForbiddenAddressError);
    });
  }

  it("accepts public addresses and leaves host names to the connect-time check", () => {
    for (const text of [
      "https://8.8.8.8/x.png",
      "https://[2606:4700:4700::1111]/",
      "https://cdn.example.com/img.png",
      "http://localhost:8080/", // resolved (and refused) when connecting
    ]) {
      expect(() => assertUrlAllowed(new URL(text)), text).not.toThrow();
    }
  });

  it("lets private literals through with allowPrivateNetworks, but not metadata", () => {
    const allow = { allowPrivateNetworks: true };
    expect(() => assertUrlAllowed(new URL("http://127.0.0.1:9/"), allow)).not.toThrow();
    expect(() => assertUrlAllowed(new URL("http://169.254.169.254/"), allow)).toThrow(/metadata/);
  });
});

describe("assertUrlResolvesAllowed", () => {
  const fakeDns = (answers: Record<string, string[]>) => async (hostname: string) =>
    (answers[hostname] ?? []).map((address) => ({
      address,
      family: address.includes(":") ? 6 : 4,
    }));

  it("refuses a name when any of its addresses is refused", async () => {
    const lookup = fakeDns({
      "public.example": ["93.184.215.14"],
      "mixed.example": ["93.184.215.14", "10.0.0.5"],
      "rebound.example": ["::ffff:127.0.0.1"],
    });
    await expect(
      assertUrlResolvesAllowed(new URL("https://public.example/"), {}, lookup),
    ).resolves.toBeUndefined();
    await expect(
      assertUrlResolvesAllowed(new URL("https://mixed.example/"), {}, lookup),
    ).rejects.toThrow(/mixed\.example \(10\.0\.0\.5\) is a private address/);
    await expect(
      assertUrlResolvesAllowed(new URL("https://rebound.example/"), {}, lookup),
    ).rejects.toThrow(/loopback/);
  });

  it("refuses localhost with the real resolver", async () => {
    await expect(assertUrlResolvesAllowed(new URL("http://localhost:1/"))).rejects.toThrow(
      ForbiddenAddressError,
    );
  });
});
