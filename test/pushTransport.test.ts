// The Node connect lookup of push delivery (src/pushTransport.ts), on a resolver that gives
// fixed answers: a name with any private address is refused, in both callback forms net uses.
import { describe, expect, it } from "vitest";
import type { LookupAddress, LookupOptions } from "node:dns";
import { publicOnlyLookup } from "../src/pushTransport.js";

const resolver = (addresses: LookupAddress[]) => ({
  lookup: ((_: string, options: LookupOptions, callback: (error: Error | null, addresses: LookupAddress[]) => void) => {
    expect(options.all).toBe(true); // every address is checked, not only the first
    callback(null, addresses);
  }) as never,
});

const run = (addresses: LookupAddress[], all: boolean) =>
  new Promise<{ error: Error | null; address: unknown; family?: number }>((resolve) =>
    publicOnlyLookup(resolver(addresses))("receiver.example", { all }, (error, address, family) =>
      resolve({ error, address, family }),
    ),
  );

describe("the push connect lookup", () => {
  const publicOnes = [
    { address: "93.184.216.34", family: 4 },
    { address: "2606:2800:220:1::1", family: 6 },
  ];

  it("passes public addresses on, as a list or as the first one", async () => {
    expect(await run(publicOnes, true)).toMatchObject({ error: null, address: publicOnes });
    expect(await run(publicOnes, false)).toMatchObject({ error: null, address: "93.184.216.34", family: 4 });
  });

  it.each([
    [[{ address: "127.0.0.1", family: 4 }]],
    [[{ address: "169.254.169.254", family: 4 }]],
    [[...publicOnes, { address: "10.0.0.7", family: 4 }]], // one private address among public ones
    [[{ address: "::ffff:192.168.0.1", family: 6 }]],
    [[]],
  ])("refuses %j", async (addresses) => {
    for (const all of [true, false]) {
      const { error } = await run(addresses, all);
      expect(error).toMatchObject({
        name: "PrivateDestinationError",
        message: "receiver.example resolves to an address that is not public",
      });
    }
  });
});
