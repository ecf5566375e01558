import { isIPv4, isIPv6 } from "node:net";

/**
 * Why an address must not be reached from a URL someone else chose: a
 * channel's image URL or a client's webhook URL.
 */
export type ForbiddenAddressReason =
  "loopback" | "private" | "link-local" | "metadata" | "unspecified" | "multicast" | "reserved";

/**
 * Cloud metadata endpoints. Each also lies in a range refused anyway; they are
 * named so a refusal says what was at stake, and stay refused even where
 * private networks are allowed.
 */
const METADATA_V4 = [
  "169.254.169.254", // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle
  "169.254.170.2", // AWS ECS task credentials
  "100.100.100.200", // Alibaba Cloud
  "192.0.0.192", // Oracle Cloud (classic)
];
const METADATA_V6 = ["fd00:ec2::254"]; // AWS over IPv6

/** One IPv4 range: the first address as a 32-bit number and the prefix length. */
type V4Range = readonly [base: number, prefix: number, reason: ForbiddenAddressReason];

const V4_RANGES: readonly V4Range[] = [
  [v4("0.0.0.0"), 8, "unspecified"], // "this network"; 0.0.0.0 reaches the host itself
  [v4("10.0.0.0"), 8, "private"],
  [v4("100.64.0.0"), 10, "private"], // carrier-grade NAT, shared address space
  [v4("127.0.0.0"), 8, "loopback"],
  [v4("169.254.0.0"), 16, "link-local"],
  [v4("172.16.0.0"), 12, "private"],
  [v4("192.0.0.0"), 24, "reserved"], // IETF protocol assignments
  [v4("192.0.2.0"), 24, "reserved"], // documentation
  [v4("192.88.99.0"), 24, "reserved"], // 6to4 relay anycast
  [v4("192.168.0.0"), 16, "private"],
  [v4("198.18.0.0"), 15, "reserved"], // benchmarking
  [v4("198.51.100.0"), 24, "reserved"], // documentation
  [v4("203.0.113.0"), 24, "reserved"], // documentation
  [v4("224.0.0.0"), 4, "multicast"],
  [v4("240.0.0.0"), 4, "reserved"], // includes 255.255.255.255
];

function v4(text: string): number {
  return text.split(".").reduce((acc, part) => acc * 256 + Number(part), 0);
}

function inV4Range(value: number, [base, prefix]: V4Range): boolean {
  const size = 2 ** (32 - prefix);
  return value >= base && value < base + size;
}

const metadataV4 = new Set(METADATA_V4.map(v4));

function classifyV4(value: number): ForbiddenAddressReason | undefined {
  if (metadataV4.has(value)) return "metadata";
  return V4_RANGES.find((range) => inV4Range(value, range))?.[2];
}

/**
 * The 16 bytes of an IPv6 address in any textual form Node accepts
 * (`::`, embedded dotted quad, zone id), or `undefined` if it is not one.
 */
export function parseIPv6(text: string): Uint8Array | undefined {
  const address = text.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  if (!isIPv6(address)) return undefined;
  // An embedded dotted quad (::ffff:127.0.0.1) becomes its two hex groups.
  const head = address.replace(/(\d+\.\d+\.\d+\.\d+)$/, (dotted) => {
    const value = v4(dotted);
    return `${Math.floor(value / 65536).toString(16)}:${(value % 65536).toString(16)}`;
  });
  const groups: number[] = [];
  const [left = "", right] = head.split("::");
  const leftGroups = left === "" ? [] : left.split(":");
  const rightGroups = right === undefined || right === "" ? [] : right.split(":");
  const missing = 8 - leftGroups.length - rightGroups.length;
  for (const group of leftGroups) groups.push(parseInt(group, 16));
  for (let i = 0; i < missing; i += 1) groups.push(0);
  for (const group of rightGroups) groups.push(parseInt(group, 16));
  if (groups.length !== 8) return undefined;
  const bytes = new Uint8Array(16);
  groups.forEach((group, i) => {
    bytes[i * 2] = group >> 8;
    bytes[i * 2 + 1] = group & 0xff;
  });
  return bytes;
}

function v4At(bytes: Uint8Array, offset: number): number {
  return (
    (bytes[offset] as number) * 2 ** 24 +
    (bytes[offset + 1] as number) * 2 ** 16 +
    (bytes[offset + 2] as number) * 2 ** 8 +
    (bytes[offset + 3] as number)
  );
}

function startsWith(bytes: Uint8Array, prefix: readonly number[]): boolean {
  return prefix.every((byte, i) => bytes[i] === byte);
}

let metadataV6: Uint8Array[] | undefined;

function classifyV6(bytes: Uint8Array): ForbiddenAddressReason | undefined {
  metadataV6 ??= METADATA_V6.map((text) => parseIPv6(text) as Uint8Array);
  if (metadataV6.some((known) => known.every((byte, i) => bytes[i] === byte))) return "metadata";
  const zeroTo = (end: number) => bytes.subarray(0, end).every((byte) => byte === 0);
  if (zeroTo(16)) return "unspecified";
  if (zeroTo(15) && bytes[15] === 1) return "loopback";
  // Addresses that carry an IPv4 address are judged by it: mapped (::ffff:a.b.c.d),
  // compatible (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:AABB:CCDD::).
  if (zeroTo(10) && bytes[10] === 0xff && bytes[11] === 0xff) return classifyV4(v4At(bytes, 12));
  if (zeroTo(12)) return classifyV4(v4At(bytes, 12));
  if (startsWith(bytes, [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0])) {
    return classifyV4(v4At(bytes, 12));
  }
  if (startsWith(bytes, [0x20, 0x02])) return classifyV4(v4At(bytes, 2));
  const first = bytes[0] as number;
  const second = bytes[1] as number;
  if (first === 0xff) return "multicast";
  if (first === 0xfe && (second & 0xc0) === 0x80) return "link-local"; // fe80::/10
  if (first === 0xfe && (second & 0xc0) === 0xc0) return "private"; // fec0::/10, site-local
  if ((first & 0xfe) === 0xfc) return "private"; // fc00::/7, unique local (fd00::/8)
  if (startsWith(bytes, [0x00, 0x64, 0xff, 0x9b, 0x00, 0x01])) return "private"; // local NAT64
  // 2001::/23: IETF protocol assignments, Teredo (which hides its IPv4 address) among them.
  if (first === 0x20 && second === 0x01 && (bytes[2] as number) < 0x02) return "reserved";
  if (startsWith(bytes, [0x20, 0x01, 0x0d, 0xb8])) return "reserved"; // documentation
  // Only 2000::/3 is global unicast; everything else is unassigned or special.
  if ((first & 0xe0) !== 0x20) return "reserved";
  return undefined;
}

/**
 * Why `ip` (an IPv4 or IPv6 address as text, brackets and zone id allowed)
 * is not a public unicast address, or `undefined` when it is one. Text that
 * is not an IP address at all is `"reserved"`: refusing is the safe answer.
 */
export function classifyAddress(ip: string): ForbiddenAddressReason | undefined {
  if (isIPv4(ip)) return classifyV4(v4(ip));
  const bytes = parseIPv6(ip);
  return bytes ? classifyV6(bytes) : "reserved";
}

/** Whether `host` (a URL's hostname, IPv6 in brackets or not) is an IP literal. */
export function isIpLiteral(host: string): boolean {
  return isIPv4(host) || parseIPv6(host) !== undefined;
}
