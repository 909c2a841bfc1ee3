// Scoped API tokens: what a secret looks like, how it is hashed, what each scope allows. The
// library (Corq.createToken / listTokens / revokeToken / verifyToken) and the Worker's
// authentication (src/http/auth.ts) share this file.
import { z } from "zod";
import { streamName } from "./config.js";
import { TOKEN_SCOPES, type TokenScope } from "./tokenScopes.js";

export { TOKEN_SCOPES, type TokenScope };

/** The scopes each scope includes. */
const includes: Record<TokenScope, readonly TokenScope[]> = {
  append: ["append"],
  read: ["read"],
  operate: ["operate", "read"],
  admin: TOKEN_SCOPES,
};

/** Whether a holder of `scopes` may do what `needed` allows. */
export function scopesAllow(scopes: readonly TokenScope[], needed: TokenScope): boolean {
  return scopes.some((scope) => includes[scope]?.includes(needed));
}

/**
 * Whether a holder may append to `stream`. Only a token whose append comes from the `append`
 * scope alone is limited by its prefix (an admin token may not carry one: createToken refuses it).
 */
export function mayAppendTo(holder: { scopes: readonly TokenScope[]; streamPrefix: string | null }, stream: string) {
  if (!scopesAllow(holder.scopes, "append")) return false;
  return holder.streamPrefix === null || stream.startsWith(holder.streamPrefix);
}

// "corq_" + 32 random bytes, base64url: 256 bits, so a lookup by hash needs no slow hash and no salt.
const SECRET_PREFIX = "corq_";
const secretShape = /^corq_[A-Za-z0-9_-]{43}$/;

/** Whether `text` has the shape of a token secret (anything else is refused without a lookup). */
export const looksLikeTokenSecret = (text: string) => secretShape.test(text);

export function newTokenSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const base64 = btoa(String.fromCharCode(...bytes));
  return SECRET_PREFIX + base64.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** SHA-256 of the secret, hex: what the tokens table stores and is searched by. */
export async function tokenHash(secret: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(secret)));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** A token id as the database makes them (gen_random_uuid). */
export const tokenId = z
  .string()
  .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, "a token id (a UUID)");

/**
 * What createToken and POST /tokens accept. Strict: an unknown field (say `stream_prefix`) is
 * refused, never ignored — ignoring it would hand out an unlimited append token.
 */
export const tokenInput = z
  .strictObject({
    name: z.string().regex(/^[^\p{Cc}\p{Cs}]{1,100}$/u, "1-100 characters, no control characters"),
    scopes: z
      .array(z.enum(TOKEN_SCOPES))
      .min(1, "at least one scope")
      .max(TOKEN_SCOPES.length * 2),
    streamPrefix: streamName.nullable().optional(),
  })
  .superRefine((input, ctx) => {
    if (input.streamPrefix == null) return;
    if (!input.scopes.includes("append")) {
      ctx.addIssue({ code: "custom", path: ["streamPrefix"], message: "limits appends: it needs the append scope" });
    } else if (input.scopes.includes("admin")) {
      ctx.addIssue({ code: "custom", path: ["streamPrefix"], message: "an admin token appends anywhere: no prefix" });
    }
  })
  .transform((input) => ({
    name: input.name,
    // once each, in one order
    scopes: TOKEN_SCOPES.filter((scope) => input.scopes.includes(scope)),
    streamPrefix: input.streamPrefix ?? null,
  }));
