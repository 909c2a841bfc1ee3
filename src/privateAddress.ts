// Which destinations push delivery refuses unless an operator allows private networks
// (`CORQ_PUSH_ALLOW_PRIVATE=true`, or `createCorq({ pushAllowPrivate: true })`): anything that
// is not the public internet, so a subscription cannot make corq call into its own network
// (SSRF). One rule for the URL's text (Workers; literal IPs in Node) and for the address a
// Node delivery actually connects to (pushTransport.ts). Pure code: runs in Node and Workers.

/** Raised for a refused destination, by its URL text or by the address a name resolved to. */
export class PrivateDestinationError extends Error {
  override name = "PrivateDestinationError";
}

// [first address, prefix length] in 32-bit form
const privateV4: [number, number][] = [
  [0x00000000, 8], // 0.0.0.0/8 "this network", the unspecified address
  [0x0a000000, 8], // 10/8 private (RFC 1918)
  [0x64400000, 10], // 100.64/10 carrier-grade NAT (RFC 6598)
  [0x7f000000, 8], // 127/8 loopback
  [0xa9fe0000, 16], // 169.254/16 link-local (cloud metadata endpoints live here)
  [0xac100000, 12], // 172.16/12 private (RFC 1918)
  [0xc0000000, 24], // 192.0.0/24 IETF protocol assignments
  [0xc0000200, 24], // 192.0.2/24 documentation (TEST-NET-1, RFC 5737)
  [0xc0586300, 24], // 192.88.99/24 6to4 relay anycast (deprecated, RFC 7526)
  [0xc0a80000, 16], // 192.168/16 private (RFC 1918)
  [0xc6120000, 15], // 198.18/15 benchmarking
  [0xc6336400, 24], // 198.51.100/24 documentation (TEST-NET-2)
  [0xcb007100, 24], // 203.0.113/24 documentation (TEST-NET-3)
  [0xe0000000, 4], // 224/4 multicast
  [0xf0000000, 4], // 240/4 reserved, and the broadcast address
];

function parseV4(text: string): number | null {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (!match) return null;
  const parts = match.slice(1).map(Number);
  if (parts.some((p) => p > 255)) return null;
  // the four octets, most significant first
  return parts.reduce((address, octet) => (address << 8) | octet, 0) >>> 0;
}

const inV4 = (address: number, [first, bits]: [number, number]) =>
  bits === 0 || address >>> (32 - bits) === first >>> (32 - bits);

const isPrivateV4 = (address: number) => privateV4.some((range) => inV4(address, range));

type Words = [number, number, number, number, number, number, number, number];
const eightWords = (w: number[]): w is Words => w.length === 8;

/** The eight 16-bit words of an IPv6 address (zone and brackets dropped), or null. */
function parseV6(text: string): Words | null {
  let rest = text
    .replace(/^\[|\]$/g, "")
    .replace(/%.*$/, "")
    .toLowerCase();
  const tail: number[] = [];
  const [, prefix, dotted] = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(rest) ?? [];
  if (prefix !== undefined && dotted !== undefined) {
    const address = parseV4(dotted);
    if (address === null) return null;
    tail.push(address >>> 16, address & 0xffff);
    rest = prefix.endsWith("::") ? prefix : prefix.slice(0, -1);
  }
  // split always gives a first half; a second only around a "::"
  const [before, afterGap, ...more] = rest.split("::");
  if (before === undefined || more.length > 0) return null;
  const words = (half: string) => (half === "" ? [] : half.split(":"));
  const head = words(before);
  const after = afterGap === undefined ? [] : words(afterGap);
  if ([...head, ...after].some((w) => !/^[0-9a-f]{1,4}$/.test(w))) return null;
  const given = head.length + after.length + tail.length;
  if (afterGap === undefined ? given !== 8 : given > 7) return null;
  const zeros = new Array(8 - given).fill(0);
  const all = [...head.map((w) => parseInt(w, 16)), ...zeros, ...after.map((w) => parseInt(w, 16)), ...tail];
  return eightWords(all) ? all : null;
}

function isPrivateV6(w: Words): boolean {
  const v4Of = (high: number, low: number) => ((high << 16) | low) >>> 0;
  if (w.slice(0, 6).every((x) => x === 0)) return true; // ::/96: unspecified, loopback, IPv4-compatible
  if (w.slice(0, 5).every((x) => x === 0) && w[5] === 0xffff) return true; // ::ffff:0:0/96 IPv4-mapped
  if (w.slice(0, 4).every((x) => x === 0) && w[4] === 0xffff && w[5] === 0) return true; // ::ffff:0:0:0/96 IPv4-translated
  if (w[0] === 0x64 && w[1] === 0xff9b && w[2] === 1) return true; // 64:ff9b:1::/48 local-use NAT64
  if (w[0] === 0x64 && w[1] === 0xff9b && w.slice(2, 6).every((x) => x === 0)) return isPrivateV4(v4Of(w[6], w[7])); // NAT64
  if (w[0] === 0x2002) return isPrivateV4(v4Of(w[1], w[2])); // 6to4 carries an IPv4 address
  if (w[0] === 0x0100 && w.slice(1, 4).every((x) => x === 0)) return true; // 100::/64 discard-only (RFC 6666)
  // 2001::/23 IETF protocol assignments: Teredo 2001::/32 (it tunnels to any IPv4 address),
  // benchmarking 2001:2::/48, ORCHID 2001:10::/28 and 2001:20::/28
  if (w[0] === 0x2001 && w[1] < 0x0200) return true;
  if (w[0] === 0x2001 && w[1] === 0x0db8) return true; // 2001:db8::/32 documentation (RFC 3849)
  if ((w[0] & 0xfff0) === 0x3ff0) return true; // 3fff::/20 documentation (RFC 9637)
  if (w[0] === 0x5f00) return true; // 5f00::/16 SRv6 segment identifiers (RFC 9602)
  if ((w[0] & 0xfe00) === 0xfc00) return true; // fc00::/7 unique local
  if ((w[0] & 0xffc0) === 0xfe80) return true; // fe80::/10 link-local
  if ((w[0] & 0xffc0) === 0xfec0) return true; // fec0::/10 site-local (deprecated)
  if ((w[0] & 0xff00) === 0xff00) return true; // ff00::/8 multicast
  return false;
}

/**
 * True for an IP address (text, as DNS or a URL gives it) that is not a public internet
 * address: loopback, private (RFC 1918), carrier-grade NAT, link-local, unique local,
 * unspecified, multicast, reserved, and IPv4-mapped / -compatible IPv6. Anything that does
 * not parse as an address counts as private (refused).
 */
export function isPrivateAddress(address: string): boolean {
  const v4 = parseV4(address);
  if (v4 !== null) return isPrivateV4(v4);
  const v6 = parseV6(address);
  return v6 === null ? true : isPrivateV6(v6);
}

/**
 * Why a URL is refused by its text alone, or null: `localhost` and `*.localhost`, or a
 * literal IP address that is private. The URL parser has already turned every spelling of an
 * IPv4 address (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`) into dotted form.
 */
export function privateHostProblem(url: URL): string | null {
  const host = url.hostname.toLowerCase().replace(/\.$/, "");
  if (host === "localhost" || host.endsWith(".localhost")) return `${host} is not a public address`;
  const literal = parseV4(host) !== null || host.startsWith("[");
  if (literal && isPrivateAddress(host)) return `${host} is not a public address`;
  return null;
}
