// src/node/forwarded.ts: who a request on the Node runtime came from, and what of
// X-Forwarded-* is believed (only the words of CORQ_TRUSTED_PROXIES).
import { describe, expect, it } from "vitest";
import { forwardedClient, parseTrustedProxies } from "../src/node/forwarded.js";

const request = (peer: string, headers: Record<string, string> = {}, encrypted = false) => ({
  peer,
  encrypted,
  header: (name: string) => headers[name],
});

describe("CORQ_TRUSTED_PROXIES", () => {
  it("takes addresses and CIDRs of both families, separated by commas or spaces", () => {
    const trusted = parseTrustedProxies("10.0.0.0/8, 192.168.1.7 fd00::/8,::1");
    expect(["10.1.2.3", "192.168.1.7", "fd12::1", "::1"].map(trusted)).toEqual([true, true, true, true]);
    expect(["11.0.0.1", "192.168.1.8", "fe80::1", "127.0.0.1", "not an address"].map(trusted)).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
  });

  it("trusts nobody when unset or empty", () => {
    for (const value of [undefined, "", " , "]) expect(parseTrustedProxies(value)("127.0.0.1")).toBe(false);
  });

  it("refuses what is not an address or CIDR (a typo must not change whom it trusts)", () => {
    for (const value of ["10.0.0.0/33", "::/129", "10.0.0/8", "localhost", "10.0.0.0/8/1", "1.2.3.4/x"]) {
      expect(() => parseTrustedProxies(value), value).toThrow(/CORQ_TRUSTED_PROXIES/);
    }
  });
});

describe("forwardedClient", () => {
  const trusted = parseTrustedProxies("127.0.0.1, 10.0.0.0/8");

  it("from an untrusted peer: the peer, whatever X-Forwarded-* say", () => {
    const peers = ["198.51.100.1", "::ffff:198.51.100.2"];
    const clients = peers.map((peer) =>
      forwardedClient(request(peer, { "x-forwarded-for": "1.2.3.4", "x-forwarded-proto": "https" }), trusted),
    );
    expect(clients).toEqual([
      { address: "198.51.100.1", secure: false },
      { address: "198.51.100.2", secure: false },
    ]);
  });

  it("behind trusted proxies: the nearest untrusted hop, read from the right; the nearest proxy's scheme", () => {
    const chain = forwardedClient(
      request("::ffff:127.0.0.1", {
        "x-forwarded-for": "6.6.6.6, 198.51.100.9, 10.1.1.1",
        "x-forwarded-proto": "http, https",
      }),
      trusted,
    );
    expect(chain).toEqual({ address: "198.51.100.9", secure: true });
    // only trusted hops (and garbage): the farthest one
    const allTrusted = forwardedClient(
      request("127.0.0.1", { "x-forwarded-for": "10.0.0.2, junk, 10.0.0.3" }),
      trusted,
    );
    expect(allTrusted).toEqual({ address: "10.0.0.2", secure: false });
    // no header: the proxy itself, and the socket's scheme
    expect(forwardedClient(request("10.9.9.9", {}, true), trusted)).toEqual({ address: "10.9.9.9", secure: true });
  });
});
