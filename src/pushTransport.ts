// How push delivery reaches a receiver, refusing destinations that are not on the public
// internet unless private networks are allowed (privateAddress.ts).
//
//   Workers  the runtime's fetch. Cloudflare's network cannot reach private addresses of its
//            own; what is left to refuse is in the URL's text (localhost, literal IPs — the
//            local stack's workerd would reach those).
//   Node     undici's fetch through an Agent whose connect `lookup` resolves the name and
//            refuses it when any of its addresses is private: the address checked is the one
//            connected to, so a name that resolves to a public address for the check and a
//            private one for the connection (DNS rebinding) gets nowhere. Literal IPs skip
//            the lookup; the URL-text check covers them.
import type { LookupAddress, LookupOptions } from "node:dns";
import type { Corq } from "./types.js";
import { isPrivateAddress, privateHostProblem, PrivateDestinationError } from "./privateAddress.js";

export interface PushTransport {
  fetch(url: string, init: RequestInit): Promise<Response>;
  /** Closes the connections kept alive (Node); the transport opens new ones if used again. */
  close(): Promise<void>;
}

// Variable specifiers keep wrangler's bundler from pulling Node's HTTP client into the Worker.
const UNDICI = "undici";
const NODE_DNS = "node:dns";

const onWorkers = () => globalThis.navigator?.userAgent === "Cloudflare-Workers";

export function createPushTransport(options: { allowPrivate: boolean }): PushTransport {
  const checkText = (url: string) => {
    const problem = options.allowPrivate ? null : privateHostProblem(new URL(url));
    if (problem) throw new PrivateDestinationError(problem);
  };
  if (onWorkers()) {
    return {
      fetch: async (url, init) => (checkText(url), fetch(url, init)),
      close: async () => undefined,
    };
  }
  type Undici = typeof import("undici");
  const open = async () => {
    const undici = (await import(/* @vite-ignore */ UNDICI)) as Undici;
    const dns = (await import(/* @vite-ignore */ NODE_DNS)) as typeof import("node:dns");
    const connect = options.allowPrivate ? {} : { lookup: publicOnlyLookup(dns) };
    return { undici, agent: new undici.Agent({ connect }) };
  };
  // Opened now, not at the first push: loading undici took the first request of a serve
  // process 1 s at load 8-12 (190 ms in issue 49) after its claim had charged the rate limit,
  // and a late first request lands in the next requests' window at the receiver
  // (docs/flow-control.md, "What the receiver sees"). No connection is made until a push.
  let client: Promise<{ undici: Undici; agent: InstanceType<Undici["Agent"]> }> | undefined = open();
  client.catch(() => undefined); // a failed load fails the push that awaits it, as before
  return {
    async fetch(url, init) {
      checkText(url);
      client ??= open();
      const { undici, agent } = await client;
      const response = await undici.fetch(url, { ...(init as object), dispatcher: agent });
      return response as unknown as Response;
    },
    async close() {
      const opened = client;
      client = undefined;
      if (opened) await (await opened).agent.close();
    },
  };
}

type LookupCallback = (error: Error | null, address: string | LookupAddress[], family?: number) => void;

/** A `net.connect` lookup that resolves as usual and refuses a name with any private address. */
export function publicOnlyLookup(dns: Pick<typeof import("node:dns"), "lookup">) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback) => {
    dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, "");
      const [first] = addresses;
      if (first === undefined || addresses.some((a) => isPrivateAddress(a.address))) {
        return callback(new PrivateDestinationError(`${hostname} resolves to an address that is not public`), "");
      }
      if (options.all) return callback(null, addresses);
      callback(null, first.address, first.family);
    });
  };
}

// A push handler is handed the Corq that claimed its batch (HandlerContext.corq); the
// transport of that instance is found here. createCorq registers one per instance.
const transports = new WeakMap<Corq, PushTransport>();

export function registerPushTransport(corq: Corq, transport: PushTransport): void {
  transports.set(corq, transport);
}

export function pushTransportOf(corq: Corq): PushTransport {
  const transport = transports.get(corq);
  if (!transport) throw new Error("this Corq instance has no push transport (make it with createCorq)");
  return transport;
}
