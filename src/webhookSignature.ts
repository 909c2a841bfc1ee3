// Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 over
// "<id>.<timestamp>.<body>", sent as "v1,<base64>". WebCrypto only, so it runs in Node and Workers.

const encoder = new TextEncoder();

/**
 * Why a signing secret cannot be used, or null when it can. A `whsec_` secret must be base64
 * of 24 to 64 bytes after the prefix (Standard Webhooks); any other non-empty text is a key
 * as its UTF-8 bytes. Checked where secrets come in (PUT, the Worker's environment), so a bad
 * one is refused there instead of failing every delivery or every webhook later.
 */
export function signingSecretProblem(secret: string): string | null {
  if (!secret.startsWith("whsec_")) return secret.length > 0 ? null : "is empty";
  const encoded = secret.slice("whsec_".length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || encoded.length % 4 === 1)
    return "a whsec_ secret must be base64 after the prefix";
  const bytes = decodeBase64(encoded);
  if (bytes === null) return "a whsec_ secret must be base64 after the prefix";
  if (bytes.length < 24 || bytes.length > 64) return `a whsec_ secret must encode 24 to 64 bytes, not ${bytes.length}`;
  return null;
}

/** A new signing secret: `whsec_` and 24 random bytes, base64 (push subscriptions and alerts make theirs so). */
export function newSigningSecret(): string {
  return `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(24))))}`;
}

/** A `whsec_` secret is base64 after the prefix (the HMAC key is the decoded bytes); any other is UTF-8. */
export function signingKeyBytes(secret: string): Uint8Array<ArrayBuffer> {
  if (secret.startsWith("whsec_")) return Uint8Array.from(atob(secret.slice("whsec_".length)), (c) => c.charCodeAt(0));
  return encoder.encode(secret);
}

async function hmac(secret: string, content: string): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey("raw", signingKeyBytes(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(content)));
}

const toBase64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));

/** The `webhook-signature` header value for a message. */
export async function sign(secret: string, message: { id: string; timestamp: number; body: string }): Promise<string> {
  return `v1,${toBase64(await hmac(secret, `${message.id}.${message.timestamp}.${message.body}`))}`;
}

/** Compares two byte strings in time that depends only on their lengths. */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  // b[i] exists: the lengths are equal (and `^` would read a missing byte as 0 anyway)
  for (const [i, byte] of a.entries()) diff |= byte ^ (b[i] ?? 0);
  return diff === 0;
}

export type VerifyFailure = "missing_headers" | "stale_timestamp" | "bad_signature";

/**
 * Verifies a Standard Webhooks request against one or more secrets (several during a
 * rotation). The timestamp must be within `toleranceSeconds` of `nowSeconds`; one matching
 * `v1,` entry among the space-separated signatures is enough.
 */
export async function verify(
  secrets: string[],
  headers: {
    id: string | null | undefined;
    timestamp: string | null | undefined;
    signature: string | null | undefined;
  },
  body: string,
  options: { nowSeconds?: number; toleranceSeconds?: number } = {},
): Promise<{ ok: true } | { ok: false; reason: VerifyFailure }> {
  const { id, timestamp, signature } = headers;
  if (!id || !timestamp || !signature || !/^\d{1,12}$/.test(timestamp)) return { ok: false, reason: "missing_headers" };
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(timestamp)) > (options.toleranceSeconds ?? 300))
    return { ok: false, reason: "stale_timestamp" };
  const candidates = signature
    .split(" ")
    .filter((entry) => entry.startsWith("v1,"))
    .map((entry) => decodeBase64(entry.slice(3)))
    .filter((bytes): bytes is Uint8Array => bytes !== null);
  let matched = false;
  for (const secret of secrets) {
    const expected = await hmac(secret, `${id}.${timestamp}.${body}`);
    for (const candidate of candidates) matched = constantTimeEqual(expected, candidate) || matched;
  }
  return matched ? { ok: true } : { ok: false, reason: "bad_signature" };
}

function decodeBase64(text: string): Uint8Array | null {
  try {
    return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}
