// API tokens as the library lists and creates them.
import type { TokenScope } from "../tokenScopes.js";

/** A scoped API token as listed (Corq.listTokens, GET /tokens): never its secret. */
export interface TokenInfo {
  id: string;
  name: string;
  scopes: TokenScope[];
  /** Appends only to streams whose name starts with it; null: any stream. Reads are not limited. */
  streamPrefix: string | null;
  createdAt: string;
  /** Updated at most once a minute per token (the lookup writes it). */
  lastUsedAt: string | null;
}

/** What Corq.createToken returns: the secret, shown this once (only its hash is stored). */
export interface CreatedToken extends TokenInfo {
  token: string;
}
