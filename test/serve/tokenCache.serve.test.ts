// `npm run serve` trusts a verified scoped token for CORQ_TOKEN_CACHE_MS without looking it up
// again (src/http/tokenCache.ts), and revocation keeps its bound: DELETE /tokens/:id is
// refused from the next request on in the process that revoked, in the other processes once
// its NOTIFY arrives (long before their TTL), and a revocation that sends no NOTIFY (the
// library, the CLI) within the TTL. Real processes on a real Postgres.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createCorq, type Corq } from "../../src/index.js";
import { createTestDatabase } from "../helpers/database.js";
import { startServeProcess, type ServeProcess } from "../helpers/serveProcess.js";
import { eventually } from "../helpers/stack.js";

const ADMIN = "serve-test-admin-token-0123456789abcdef";
const state = {} as { a: ServeProcess; b: ServeProcess; short: ServeProcess; library: Corq; drop: () => Promise<void> };

beforeAll(async () => {
  const database = await createTestDatabase(inject("postgresUrl"));
  state.drop = database.drop;
  const start = (ttlMs: number) =>
    startServeProcess({
      databaseUrl: database.url,
      entry: "test/serve/recordingServe.ts",
      env: { CORQ_ADMIN_TOKEN: ADMIN, CORQ_TOKEN_CACHE_MS: String(ttlMs) },
    });
  // a and b trust a token for a minute: only a revocation's own signals can end it sooner
  state.a = await start(60_000);
  [state.b, state.short] = await Promise.all([start(60_000), start(300)]);
  state.library = createCorq({ databaseUrl: database.url });
}, 90_000);

afterAll(async () => {
  await Promise.all([state.a?.stop(), state.b?.stop(), state.short?.stop()]);
  await state.library?.close();
  await state.drop?.();
});

const append = async (serve: ServeProcess, secret: string) =>
  (
    await fetch(`${serve.url}/streams/cache-1/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body: JSON.stringify({ events: [{ name: "E", data: {} }] }),
    })
  ).status;

const newToken = async () => {
  const response = await fetch(`${state.a.url}/tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "appender", scopes: ["append"] }),
  });
  expect(response.status).toBe(201);
  const { id, token: secret } = (await response.json()) as { id: string; token: string };
  return { id, secret };
};

describe("serve: verified tokens are cached, revocation keeps its bound", () => {
  it("DELETE /tokens/:id: refused at once where it was revoked, soon (NOTIFY) in the other process", async () => {
    const token = await newToken();
    expect([await append(state.a, token.secret), await append(state.b, token.secret)]).toEqual([201, 201]);
    const revoked = await fetch(`${state.a.url}/tokens/${token.id}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(revoked.status).toBe(204);
    expect(await append(state.a, token.secret)).toBe(401);
    // b cached it for a minute; the revocation's NOTIFY ends that
    await eventually(async () => expect(await append(state.b, token.secret)).toBe(401), {
      timeoutMs: 10_000,
      intervalMs: 50,
    });
  });

  it("a revocation without NOTIFY (the library): trusted until the TTL ends, not after", async () => {
    const token = await newToken();
    expect([await append(state.a, token.secret), await append(state.short, token.secret)]).toEqual([201, 201]);
    await state.library.revokeToken(token.id);
    // the cache answers: a minute's TTL is not over
    expect(await append(state.a, token.secret)).toBe(201);
    // 300 ms TTL: refused once it is over
    await eventually(async () => expect(await append(state.short, token.secret)).toBe(401), {
      timeoutMs: 10_000,
      intervalMs: 50,
    });
  });

  it("a token is never refused from the cache: one created a moment ago works everywhere at once", async () => {
    const token = await newToken();
    expect([await append(state.b, token.secret), await append(state.short, token.secret)]).toEqual([201, 201]);
    expect(await append(state.a, "corq_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")).toBe(401);
  });
});
