import { afterAll, beforeAll, inject } from "vitest";
import pg from "pg";
import { startLocalStack, type LocalStack } from "../../infra/localStack.js";
import { createTestDatabase } from "./database.js";

/**
 * The real local stack for a Worker test file: the Worker in workerd under wrangler's dev
 * server, the Neon driver through the local HTTP SQL endpoint (and the WebSocket proxy for
 * interactive transactions), on a fresh database of its own.
 */
export function useStack(options: { vars?: Record<string, string>; httpPoolSize?: number } = {}) {
  const state = {} as { stack: LocalStack; db: pg.Pool; drop: () => Promise<void> };
  beforeAll(async () => {
    const database = await createTestDatabase(inject("postgresUrl"));
    state.drop = database.drop;
    // CORQ_LOCAL: what the local stack is (infra/localStack.ts sets it too); options.vars may unset it
    state.stack = await startLocalStack({
      databaseUrl: database.url,
      httpPoolSize: options.httpPoolSize,
      vars: { CORQ_LOCAL: "true", ...options.vars },
    });
    state.db = new pg.Pool({ connectionString: database.url, max: 4 });
    // pool.end() resolves before its idle connections' sockets close, and the database is dropped
    // WITH (FORCE) right after: the server's "terminating connection" reaches the pool's 'error'
    // event (pg-pool's idle listener), which must not be an uncaught error (it failed a whole run
    // once, attributed to whichever file was running)
    state.db.on("error", () => undefined);
  }, 120_000);
  afterAll(async () => {
    await state.stack?.stop();
    await state.db?.end();
    await state.drop?.();
  });

  const api = async (
    method: string,
    path: string,
    init: { body?: unknown; headers?: Record<string, string>; token?: string | null } = {},
  ) => {
    const headers: Record<string, string> = { ...init.headers };
    const token = init.token === undefined ? state.stack.adminToken : init.token;
    if (token !== null) headers.authorization = `Bearer ${token}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      body = typeof init.body === "string" ? init.body : JSON.stringify(init.body);
      headers["content-type"] ??= "application/json";
    }
    const response = await fetch(`${state.stack.url}${path}`, { method, headers, body });
    const text = await response.text();
    const type = response.headers.get("content-type") ?? "";
    return { status: response.status, type, json: text && type.includes("json") ? JSON.parse(text) : null };
  };
  return { state, api };
}

export async function eventually<T>(check: () => Promise<T>, { timeoutMs = 15_000, intervalMs = 50 } = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }
}
