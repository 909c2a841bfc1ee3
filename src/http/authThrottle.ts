// Throttling of failed authentication (a wrong bearer token, a bad webhook signature, a wrong
// dashboard login), per client: after CORQ_AUTH_FAILURE_LIMIT failures (default 10) within
// CORQ_AUTH_FAILURE_WINDOW_S seconds of the first (default 60), the client gets 429 with
// Retry-After on every authenticated request, right token or not, until the window is over —
// so guessing runs at 10 tries a minute, not thousands. A request without credentials is not
// counted, and neither is a refusal for the configuration (no token, one too short).
//
// The client is its address as src/http/requestClient.ts knows it (Workers: CF-Connecting-IP,
// set by Cloudflare; Node: the socket, or a trusted proxy's X-Forwarded-For), so one client's
// failures never lock out another. The count lives in this isolate: exact within
// it, best effort across isolates. With the CORQ_AUTH_LIMITER rate-limit binding
// (wrangler.toml [[ratelimits]], 100 per minute) every failure is counted there too, across
// the isolates of a Cloudflare location; once it says no, this isolate blocks the client for
// its 60-second period.
import { settings } from "./env.js";
import { ProblemError } from "./problem.js";
import { requestClient } from "./requestClient.js";
import type { AuthRequest, AuthThrottle } from "./types.js";

const BINDING_PERIOD_MS = 60_000;
// clients remembered per isolate; beyond it the oldest are forgotten first
const MAX_CLIENTS = 10_000;

interface Client {
  windowStart: number;
  failures: number;
  blockedUntil: number;
}

export function createAuthThrottle(): AuthThrottle {
  const clients = new Map<string, Client>();

  const clientOf = (c: AuthRequest) => requestClient(c).address;

  const tooMany = (blockedUntil: number, now: number) => {
    const seconds = Math.max(1, Math.ceil((blockedUntil - now) / 1000));
    return new ProblemError(
      429,
      "too_many_failed_authentications",
      `too many failed authentications from this client; try again in ${seconds} s`,
      {
        "retry-after": String(seconds),
      },
    );
  };

  const forgetOld = (now: number, windowMs: number) => {
    if (clients.size < MAX_CLIENTS) return;
    for (const [id, client] of clients) {
      if (client.blockedUntil <= now && client.windowStart + windowMs <= now) clients.delete(id);
    }
    for (const id of clients.keys()) {
      if (clients.size < MAX_CLIENTS) break;
      clients.delete(id);
    }
  };

  return {
    guard(c) {
      const client = clients.get(clientOf(c));
      const now = Date.now();
      if (client && client.blockedUntil > now) throw tooMany(client.blockedUntil, now);
    },

    async failed(c) {
      const { authFailureLimit, authFailureWindowMs } = settings(c.env);
      const id = clientOf(c);
      const now = Date.now();
      let client = clients.get(id);
      if (!client || client.windowStart + authFailureWindowMs <= now) {
        forgetOld(now, authFailureWindowMs);
        client = { windowStart: now, failures: 0, blockedUntil: 0 };
        clients.set(id, client);
      }
      client.failures++;
      if (client.failures >= authFailureLimit) client.blockedUntil = client.windowStart + authFailureWindowMs;
      const limiter = c.env.CORQ_AUTH_LIMITER;
      if (limiter && !(await limiter.limit({ key: id })).success) {
        client.blockedUntil = Math.max(client.blockedUntil, now + BINDING_PERIOD_MS);
        throw tooMany(client.blockedUntil, now);
      }
    },
  };
}
