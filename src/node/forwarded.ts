// Who a request on the Node runtime came from: the socket's peer — or, when that peer is one of
// CORQ_TRUSTED_PROXIES, the client its X-Forwarded-For names and the scheme its
// X-Forwarded-Proto names. From anyone else those headers are the client's own words and are
// ignored (keyed by them, the auth throttle could be dodged by rotating them, or aimed at
// someone else's bucket).
import { BlockList, isIP } from "node:net";

export interface ForwardedClient {
  address: string;
  secure: boolean;
}

export type TrustedProxies = (address: string) => boolean;

/**
 * Parses CORQ_TRUSTED_PROXIES: addresses and CIDRs (IPv4 or IPv6) separated by commas or
 * spaces. Throws on an entry that is neither: a typo must not silently trust nobody (or everybody).
 */
export function parseTrustedProxies(value: string | undefined): TrustedProxies {
  const list = new BlockList();
  let any = false;
  for (const entry of (value ?? "").split(/[\s,]+/).filter(Boolean)) {
    const [address = "", prefix, ...rest] = entry.split("/");
    const family = isIP(address);
    const bits = prefix === undefined ? undefined : /^\d{1,3}$/.test(prefix) ? Number(prefix) : Number.NaN;
    if (family === 0 || rest.length > 0 || (bits !== undefined && !(bits <= (family === 4 ? 32 : 128)))) {
      throw new Error(`CORQ_TRUSTED_PROXIES: ${JSON.stringify(entry)} is not an IP address or CIDR`);
    }
    const type = family === 4 ? "ipv4" : "ipv6";
    if (bits === undefined) list.addAddress(address, type);
    else list.addSubnet(address, bits, type);
    any = true;
  }
  if (!any) return () => false;
  return (address) => {
    const family = isIP(address);
    return family !== 0 && list.check(address, family === 4 ? "ipv4" : "ipv6");
  };
}

/**
 * The client of a request whose socket peer is `peer` (over TLS when `encrypted`). Behind trusted
 * proxies the client is the nearest address in X-Forwarded-For that is not itself a trusted
 * proxy (read from the right: each proxy appends the address it was reached from, and only the
 * entries the trusted ones appended can be believed).
 */
export function forwardedClient(
  request: { peer: string | undefined; encrypted: boolean; header(name: string): string | undefined },
  trusted: TrustedProxies,
): ForwardedClient {
  const peer = plainAddress(request.peer ?? "") || "unknown";
  if (!trusted(peer)) return { address: peer, secure: request.encrypted };
  const hops = (request.header("x-forwarded-for") ?? "")
    .split(",")
    .map((hop) => plainAddress(hop.trim()))
    .filter((hop) => isIP(hop) !== 0);
  let address = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    address = hops[i] ?? address;
    if (!trusted(address)) break;
  }
  // the nearest proxy's word on the scheme (the last value, when several were appended)
  const proto = (request.header("x-forwarded-proto") ?? "").split(",").pop()?.trim().toLowerCase();
  return { address, secure: proto === undefined || proto === "" ? request.encrypted : proto === "https" };
}

/** An IPv4 client on a dual-stack socket appears as ::ffff:a.b.c.d: the IPv4 form, as configured. */
function plainAddress(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped?.[1] ?? address;
}
