// Whose an Idempotency-Key is (API.md "Idempotent appends"): an HTTP append's key belongs to the
// caller, so another caller's use of it neither replays this one's answer (nor confirms what it
// was sent: a 422 against a 201) nor refuses it. The names cannot collide with each other, nor
// with the library's own appends, whose scope is '' (src/corq/log.ts).
import type { Principal } from "./types.js";

/**
 * The scope of an append made by `principal`: `token:<id>` for a scoped token (its bearer secret
 * or a dashboard session it logged in), `admin` for CORQ_ADMIN_TOKEN (and its dashboard
 * session), `public` where appends are not authenticated (CORQ_PUBLIC_APPEND: the route checks
 * no credentials, so every append, with a token or without, is the same caller).
 */
export function idempotencyScope(principal: Principal | undefined): string {
  if (!principal) return "public";
  return principal.tokenId === null ? "admin" : `token:${principal.tokenId}`;
}
