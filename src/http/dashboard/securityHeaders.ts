// Response headers of every dashboard response (pages, redirects, error pages, assets).
import type { MiddlewareHandler } from "hono";
import { requestClient } from "../requestClient.js";
import type { Env } from "../types.js";

// Everything the pages load is ours: one stylesheet, one script (no inline script or style),
// the live refresh fetches the page itself, forms post to this origin.
const contentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ");

export function securityHeaders(): MiddlewareHandler<{ Bindings: Env }> {
  return async function dashboardSecurityHeaders(c, next) {
    await next();
    const headers = c.res.headers;
    headers.set("content-security-policy", contentSecurityPolicy);
    headers.set("x-frame-options", "DENY"); // frame-ancestors for browsers without CSP 2
    headers.set("x-content-type-options", "nosniff");
    headers.set("referrer-policy", "same-origin");
    // pages show live state and are behind a login: never stored; the assets set their own
    if (!headers.has("cache-control")) headers.set("cache-control", "no-store");
    // over https only (directly, or behind a trusted TLS proxy): a browser ignores it on http,
    // and local development is plain http
    if (requestClient(c).secure) headers.set("strict-transport-security", "max-age=31536000; includeSubDomains");
  };
}
