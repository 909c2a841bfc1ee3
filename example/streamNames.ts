// Stream names the example derives from event data (a visitor's stream, a room id). Data is
// whatever producers sent: a room id may be "Room 4", "Salle été" or 512 bytes long, and a
// visitor's stream may already be 200 characters. A derived name that corq refuses would fail
// its batch on every attempt and dead-letter the key, so every name built here is valid by
// construction: readable when the data allows it, a digest when it does not.

/**
 * The streams the example's subscriptions take: visitors' own. Without this filter an append
 * token limited to `orders-` could append `Registered` to `orders-evil1` and have the greeter
 * welcome it (`welcome-orders-evil1`), or fill a room with `Arrived` (`room-full-1-lobby-x`).
 * Every subscription here takes only the streams it is meant for (docs/security.md).
 */
export const VISITOR_STREAMS = ["visitor-"];

/** corq's stream-name rule (src/config.ts `streamName`): 1–200 of these characters, not starting with one of `.:@+=-`. */
export const STREAM_NAME_MAX = 200;
const streamNameRule = /^[A-Za-z0-9_][A-Za-z0-9_.:@+=-]{0,199}$/;

// Kept as they are: the allowed characters except `=`, which escapes every other UTF-8 byte
// (`=20` for a space). Escaping is one-to-one, so two different parts never share a name.
const kept = /^[A-Za-z0-9_.:@+-]$/;

/**
 * `<prefix>-<part, escaped>` (e.g. `welcome-visitor-ada`, `room-full-1-Room=204`), or, when
 * that would exceed 200 characters, `<prefix>:<sha256 of part, hex>`. The two forms differ
 * in the character after the prefix, so they cannot meet either.
 */
export async function derivedStream(prefix: string, part: string): Promise<string> {
  if (!streamNameRule.test(`${prefix}:`) || prefix.includes("=")) throw new Error(`bad stream prefix "${prefix}"`);
  let escaped = "";
  for (const byte of new TextEncoder().encode(part)) {
    const char = String.fromCharCode(byte);
    escaped += byte < 0x80 && kept.test(char) ? char : `=${byte.toString(16).toUpperCase().padStart(2, "0")}`;
    if (prefix.length + 1 + escaped.length > STREAM_NAME_MAX) return `${prefix}:${await sha256(part)}`;
  }
  return `${prefix}-${escaped}`;
}

async function sha256(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
}
