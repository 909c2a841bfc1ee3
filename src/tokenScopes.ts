// The scopes an API token can hold: a leaf module, so the public types (types.ts) can name them
// without importing token handling (tokens.ts imports validation).
/**
 * append  POST /streams/…/events (optionally only streams starting with streamPrefix)
 * read    every GET (the dashboard read-only)
 * operate read + pause/resume, retry/skip, rewind
 * admin   everything: subscriptions, tokens, /advance, /consume, /dispatch — and append anywhere
 */
export const TOKEN_SCOPES = ["append", "read", "operate", "admin"] as const;
export type TokenScope = (typeof TOKEN_SCOPES)[number];
