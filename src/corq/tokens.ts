// Tokens: scoped API tokens (src/tokens.ts), stored as hashes.
import { parseOrThrow } from "../config.js";
import { CorqError, present } from "../errors.js";
import {
  deleteToken,
  insertToken,
  listTokens,
  toTokenInfo,
  verifyToken,
  type TokenRow,
} from "../sql/operate/tokens.js";
import { looksLikeTokenSecret, newTokenSecret, tokenHash, tokenId, tokenInput } from "../tokens.js";
import type { Corq } from "../types.js";
import type { PartDeps } from "./options.js";

export function createTokens({
  executor,
}: Pick<PartDeps, "executor">): Pick<Corq, "createToken" | "listTokens" | "revokeToken" | "verifyToken"> {
  return {
    async createToken(input) {
      const { name, scopes, streamPrefix } = parseOrThrow(tokenInput, input, "invalid_input", "token");
      const secret = newTokenSecret();
      const [row] = await (await executor()).run<TokenRow>(
        insertToken({ name, scopes, streamPrefix, hash: await tokenHash(secret) }),
      );
      return { ...toTokenInfo(present(row, "the inserted token row")), token: secret };
    },

    async listTokens() {
      return (await (await executor()).run<TokenRow>(listTokens())).map(toTokenInfo);
    },

    async revokeToken(id) {
      parseOrThrow(tokenId, id, "invalid_input", "id");
      const rows = await (await executor()).run(deleteToken(id));
      if (rows.length === 0) throw new CorqError("unknown_token", `no token with id ${id}`);
    },

    async verifyToken(secret) {
      if (typeof secret !== "string" || !looksLikeTokenSecret(secret)) return null;
      const [row] = await (await executor()).run<TokenRow>(verifyToken(await tokenHash(secret)));
      return row ? toTokenInfo(row) : null;
    },
  };
}
