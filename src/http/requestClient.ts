import type { Env, RequestClient } from "./types.js";
// Who sent a request, as far as this runtime can know it: the address the auth throttle counts
// failures by (src/http/authThrottle.ts), and whether the client reached us over https (the
// dashboard's Secure cookie, HSTS, the origin its forms must come from).
//
//   Workers  CF-Connecting-IP, which Cloudflare sets on every request (a client's own value is
//            replaced); the scheme of the request URL.
//   Node     CORQ_CLIENT, set per request by the runtime from the socket — and from
//            X-Forwarded-For / X-Forwarded-Proto only when the socket is one of
//            CORQ_TRUSTED_PROXIES (src/node/forwarded.ts). Headers a client sets itself are never
//            believed there: keyed by them, one client locked everyone out, and rotating them
//            gave unlimited guesses.

type ClientContext = { env: Env; req: { url: string; header(name: string): string | undefined } };

export function requestClient(c: ClientContext): RequestClient {
  if (c.env.CORQ_NODE) return c.env.CORQ_CLIENT ?? { address: "unknown", secure: urlIsSecure(c) };
  return { address: c.req.header("cf-connecting-ip") ?? "unknown", secure: urlIsSecure(c) };
}

/** The origin the client sees (behind a trusted TLS proxy: https, though we were reached over http). */
export function requestOrigin(c: ClientContext): string {
  const url = new URL(c.req.url);
  return `${requestClient(c).secure ? "https:" : url.protocol}//${url.host}`;
}

const urlIsSecure = (c: ClientContext) => new URL(c.req.url).protocol === "https:";
