// DNS rebinding guard of the local stack. A web page on a hostname its owner re-points at
// 127.0.0.1 reaches the local Worker from the victim's browser, same-origin with itself; its
// requests carry that hostname as Host. With CORQ_LOCAL=true (set by the local stack: from
// configuration, never from the request) only loopback names are answered. The port is not
// checked: the Worker is not told which port it is served on (request.url follows the Host
// header), and the hostname is what a rebinding page cannot fake.
import type { MiddlewareHandler } from "hono";
import { INTERNAL_ORIGIN } from "./dispatch.js";
import { settings } from "./env.js";
import { problem } from "./problem.js";
import type { Env } from "./types.js";

// the cron's own consumer invocations (SELF) are addressed to the internal origin, whose
// .internal name no public DNS answers
const allowedHosts = new Set(["127.0.0.1", "localhost", "[::1]", new URL(INTERNAL_ORIGIN).hostname]);

export function requireLocalHost(): MiddlewareHandler<{ Bindings: Env }> {
  return async function localHostOnly(c, next) {
    if (!settings(c.env).local) return next();
    const hostname = new URL(c.req.url).hostname;
    if (!allowedHosts.has(hostname)) {
      return problem(
        421,
        "misdirected_request",
        `this local server answers 127.0.0.1 and localhost only, not ${JSON.stringify(hostname)}`,
      );
    }
    await next();
  };
}
