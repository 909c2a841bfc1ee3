// The destination rule of push delivery (src/privateAddress.ts): by URL text and by address.
import { describe, expect, it } from "vitest";
import { isPrivateAddress, privateHostProblem } from "../src/privateAddress.js";

const refusedUrls = [
  // loopback in every spelling the URL parser accepts
  "http://127.0.0.1:8080/hook",
  "http://localhost:8080/hook",
  "http://2130706433:8080/hook",
  "http://0x7f.1:8080/hook",
  "http://0177.0.0.1/",
  "http://127.1/",
  "http://127.0.0.1./",
  "http://127.255.255.254/",
  "http://LOCALHOST./",
  "http://api.localhost/",
  "http://[::1]/",
  "http://[0:0:0:0:0:0:0:1]/",
  // private, shared, link-local, unspecified, multicast, reserved
  "http://10.0.0.1/",
  "http://172.16.0.1/",
  "http://172.31.255.255/",
  "http://192.168.1.1/",
  "http://100.64.0.1/",
  "http://100.127.255.255/",
  "http://169.254.169.254/latest/meta-data/",
  "http://0.0.0.0/",
  "http://0/",
  "http://224.0.0.1/",
  "http://255.255.255.255/",
  "http://[::]/",
  "http://[fe80::1]/",
  "http://[febf::1]/",
  "http://[fc00::1]/",
  "http://[fd12:3456::1]/",
  "http://[ff02::1]/",
  // IPv4 inside IPv6: mapped and compatible (whatever they carry), NAT64 and 6to4 of private ones
  "http://[::ffff:127.0.0.1]/",
  "http://[::ffff:8.8.8.8]/",
  "http://[::127.0.0.1]/",
  "http://[64:ff9b::10.0.0.1]/",
  "http://[2002:c0a8:0101::1]/",
  // documentation, discard-only and IETF protocol ranges: nobody's receiver is there
  "http://192.0.2.10/",
  "http://198.51.100.1/",
  "http://203.0.113.255/",
  "http://192.88.99.1/",
  "http://[100::1]/",
  "http://[100::ffff:1]/",
  "http://[2001::1]/", // Teredo
  "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
  "http://[2001:2::1]/", // benchmarking
  "http://[2001:1ff::1]/",
  "http://[2001:db8::1]/",
  "http://[2001:db8:ffff::1]/",
  "http://[3fff::1]/",
  "http://[5f00::1]/",
];

const publicUrls = [
  "https://example.com/hook",
  "http://8.8.8.8/",
  "http://172.32.0.1/",
  "http://172.15.255.255/",
  "http://100.128.0.1/",
  "http://169.253.0.1/",
  "http://11.0.0.1/",
  "http://[2606:4700:4700::1111]/",
  "http://[64:ff9b::8.8.8.8]/",
  "http://[2002:0808:0808::1]/",
  "http://192.0.3.1/",
  "http://198.51.101.1/",
  "http://203.0.114.1/",
  "http://[100:0:0:1::1]/", // past 100::/64
  "http://[2001:200::1]/", // past 2001::/23
  "http://[2001:4860:4860::8888]/",
  "http://[2001:db9::1]/",
  "http://[4000::1]/",
  "https://localhost.example.com/", // a name: judged by the address it resolves to
];

describe("the push destination rule", () => {
  it.each(refusedUrls)("refuses %s by its text", (url) => {
    expect(privateHostProblem(new URL(url))).toMatch(/is not a public address$/);
  });

  it.each(publicUrls)("leaves %s to the address check", (url) => {
    expect(privateHostProblem(new URL(url))).toBeNull();
  });

  it("judges addresses as DNS gives them", () => {
    for (const address of [
      "127.0.0.1",
      "10.1.2.3",
      "::1",
      "::ffff:10.0.0.1",
      "fe80::1%eth0",
      "fd00::1",
      "0.0.0.0",
      "::",
    ]) {
      expect(isPrivateAddress(address), address).toBe(true);
    }
    for (const address of ["93.184.216.34", "2606:4700:4700::1111", "1.1.1.1"]) {
      expect(isPrivateAddress(address), address).toBe(false);
    }
    // what does not parse as an address is refused
    for (const text of ["", "example.com", "1.2.3", "1.2.3.256", "::g", "1:2:3:4:5:6:7:8:9", "1::2::3"]) {
      expect(isPrivateAddress(text), text).toBe(true);
    }
  });
});
