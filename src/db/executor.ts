// The one door to Postgres. Every statement corq runs goes through `Executor.run`, so the
// round-trip budget is countable (tests pin it) and drivers are interchangeable: node-postgres
// Pool/Client, the Neon serverless Pool/Client, Neon's HTTP query function (`neon()`), or a
// drizzle database/transaction.
import { sql, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { CorqError, fromDriverError } from "../errors.js";
import { guardPool, lostConnection } from "./guardPool.js";

/** What node-postgres and @neondatabase/serverless pools and clients have in common. */
export interface Queryable {
  query(config: { text: string; values: unknown[]; name?: string }): Promise<{ rows: any[] }>;
}

/** A pool that can lend a dedicated client (for transactions). */
export interface PoolLike extends Queryable {
  connect(): Promise<Queryable & { release(err?: unknown): void }>;
  end?(): Promise<void>;
}

/** A drizzle database or transaction: anything with `execute(sql)`. */
export interface DrizzleLike {
  execute(query: SQL): Promise<unknown>;
}

/**
 * Neon's HTTP query function (`neon(url)` from @neondatabase/serverless): every statement is
 * one HTTPS request answered by Neon's pooler — no connection setup, no session. Every corq
 * operation is one statement, so this is all they need; an interactive transaction (migrate,
 * deleteSubscription, a caller's outbox) needs a session (ExecutorOptions.session).
 */
export interface HttpQueryFunction {
  query(text: string, params?: unknown[], options?: { arrayMode?: boolean }): Promise<unknown>;
  transaction(...args: never[]): unknown;
}

export type Connection = Queryable | DrizzleLike | HttpQueryFunction;

export interface Executor {
  /**
   * Runs one statement and returns its rows: an unnamed statement, planned for its parameters and
   * the tables as they are (src/corq/connect.ts: why nothing is prepared).
   */
  run<T = Record<string, unknown>>(query: SQL): Promise<T[]>;
  /**
   * Runs one statement given as text (drizzle's query builders, through a transactional
   * handler's `ctx.tx`): rows as objects, or as arrays (`arrayMode`) with dates left as text,
   * as drizzle's own drivers read them.
   */
  query(text: string, params: unknown[], arrayMode: boolean): Promise<unknown[]>;
  /**
   * Runs `fn` in a transaction on a dedicated connection (the pool itself if it cannot lend one).
   * `{ dedicated: true }`: refused unless the connection can lend one (a pool, or a session over
   * HTTP) — a transaction on a shared single connection would take in every statement sent
   * beside it (a drain's other keys).
   */
  transaction<T>(fn: (tx: Executor) => Promise<T>, options?: { dedicated?: boolean }): Promise<T>;
}

const dialect = new PgDialect();

export interface ExecutorOptions {
  /** Called once per statement sent; used to pin the round-trip budget. */
  onStatement?: (text: string) => void;
  /**
   * With an HTTP query function: runs `use` with a pool for one interactive transaction (the
   * caller decides how long that pool lives). Without it, transactions are refused.
   */
  session?: Session;
}

export type Session = <T>(use: (pool: PoolLike) => Promise<T>) => Promise<T>;

export function createExecutor(connection: Connection, options: ExecutorOptions = {}): Executor {
  // every pool corq is given too (a user's, the Worker's Neon Pool): its clients' errors are heard
  if (isPool(connection)) guardPool(connection);
  // a lost or refused connection surfaces as CorqError("database_unavailable"), from every driver
  const run = <T>(query: SQL): Promise<T[]> =>
    send<T>(query).catch((error: unknown) => {
      throw fromDriverError(error);
    });
  const send = async <T>(query: SQL): Promise<T[]> => {
    const { sql: text, params } = dialect.sqlToQuery(query);
    options.onStatement?.(text);
    if (isHttp(connection)) return (await connection.query(text, params)) as T[];
    if (isQueryable(connection)) {
      const config = { text, values: params };
      if (!isPool(connection)) return (await connection.query(config)).rows as T[];
      // what pool.query does, with the connect step retried
      const client = await connectWithRetry(connection);
      try {
        const result = await client.query(config);
        client.release(lostConnection(client));
        return result.rows as T[];
      } catch (error) {
        client.release(error); // a client that failed is not reused
        throw error;
      }
    }
    const result = (await connection.execute(query)) as { rows?: T[] } | T[];
    return Array.isArray(result) ? result : (result.rows ?? []);
  };

  const query = (text: string, params: unknown[], arrayMode: boolean): Promise<unknown[]> =>
    sendText(text, params, arrayMode).catch((error: unknown) => {
      throw fromDriverError(error);
    });
  const sendText = async (text: string, params: unknown[], arrayMode: boolean): Promise<unknown[]> => {
    options.onStatement?.(text);
    if (isHttp(connection)) return (await connection.query(text, params, { arrayMode })) as unknown[];
    if (!isQueryable(connection))
      throw new CorqError("invalid_config", "drizzle queries need a pg or Neon pool or client as the connection");
    const client = isPool(connection) ? await connectWithRetry(connection) : undefined;
    const target = client ?? connection;
    try {
      const result = await target.query({
        text,
        values: params,
        ...(arrayMode ? { rowMode: "array" } : {}),
        types: textDates(target),
      } as { text: string; values: unknown[] });
      client?.release(lostConnection(client));
      return result.rows;
    } catch (error) {
      client?.release(error);
      throw error;
    }
  };

  const transaction = async <T>(fn: (tx: Executor) => Promise<T>, txOptions?: { dedicated?: boolean }): Promise<T> => {
    if (txOptions?.dedicated && !isHttp(connection) && !isPool(connection))
      throw new CorqError(
        "invalid_config",
        "a transactional handler needs a connection that can lend one to it: a pool (databaseUrl, a pg or Neon Pool) " +
          "or a neon() HTTP function with a session",
      );
    if (isHttp(connection)) {
      if (!options.session)
        throw new CorqError(
          "invalid_config",
          "an interactive transaction over HTTP needs a session (ExecutorOptions.session)",
        );
      return options.session((pool) => createExecutor(pool, { onStatement: options.onStatement }).transaction(fn));
    }
    if (!isPool(connection)) return inTransaction(createExecutor(connection, options), fn);
    const client = await connectWithRetry(connection).catch((error: unknown) => {
      throw fromDriverError(error);
    });
    try {
      return await inTransaction(createExecutor(client, options), fn);
    } finally {
      // a connection that died inside the transaction goes with it, never back to the pool
      client.release(lostConnection(client));
    }
  };

  return { run, query, transaction };
}

// What drizzle's pg drivers read as text (they map it themselves): timestamptz, timestamp, date,
// interval and their arrays. Everything else as the client parses it.
const TEXT_TYPES = new Set([1184, 1114, 1082, 1186, 1185, 1115, 1182, 1187, 1231]);
function textDates(
  client: object,
): { getTypeParser(oid: number, format?: string): (value: string) => unknown } | undefined {
  const parse = (client as { getTypeParser?: (oid: number, format?: string) => (value: string) => unknown })
    .getTypeParser;
  if (typeof parse !== "function") return undefined;
  return {
    getTypeParser: (oid, format) => (TEXT_TYPES.has(oid) ? (value: string) => value : parse.call(client, oid, format)),
  };
}

/**
 * Gets a pooled connection, retrying with exponential backoff and full jitter (100 ms doubling,
 * capped at 2 s: at most about 3 s in all with 6 attempts) while Postgres restarts, is starting up or
 * has no connection slot left. Only the connect step is retried: nothing has been sent yet, so
 * a retry cannot run a statement twice. A connection that died before it reached the caller (a
 * FATAL read with its ReadyForQuery: src/db/guardPool.ts) is such a failed connect: it goes back
 * to the pool with its error (destroyed) and another is asked for. A statement that fails on an
 * established connection is not retried here: the caller sees the error and corq's leases make
 * the work come again — or, for a lease-fenced settlement, sends it again on a new connection
 * (src/consume/retrySettle.ts). Wrong credentials or a missing database (SQLSTATE 28xxx, 3D000) fail at once.
 */
async function connectWithRetry<C extends { release(err?: unknown): void }>(
  pool: { connect(): Promise<C> },
  attempts = 6,
): Promise<C> {
  for (let attempt = 1; ; attempt++) {
    try {
      const client = await pool.connect();
      const lost = lostConnection(client);
      if (lost === undefined) return client;
      client.release(lost);
      throw lost;
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (attempt >= attempts || (typeof code === "string" && /^(28|3D)/.test(code))) throw error;
      const capMs = Math.min(2000, 100 * 2 ** (attempt - 1));
      await new Promise((resolve) => setTimeout(resolve, Math.random() * capMs));
    }
  }
}

async function inTransaction<T>(tx: Executor, fn: (tx: Executor) => Promise<T>): Promise<T> {
  await tx.run(sql`BEGIN`);
  try {
    const result = await fn(tx);
    await tx.run(sql`COMMIT`);
    return result;
  } catch (error) {
    await tx.run(sql`ROLLBACK`).catch(() => undefined);
    throw error;
  }
}

/**
 * Whether transactions on `connection` get a connection of their own (a pool, or an HTTP query
 * function with a session): what a transactional handler needs beside a drain's other statements.
 */
export function lendsConnections(connection: Connection, session?: Session): boolean {
  return isHttp(connection) ? session !== undefined : isPool(connection);
}

// neon() returns a function (a tagged template) that also has .query and .transaction
function isHttp(connection: Connection): connection is HttpQueryFunction {
  return typeof connection === "function" && typeof (connection as HttpQueryFunction).transaction === "function";
}

function isQueryable(connection: Connection): connection is Queryable {
  return !isHttp(connection) && typeof (connection as Queryable).query === "function";
}

function isPool(connection: Connection): connection is PoolLike {
  return (
    isQueryable(connection) && typeof (connection as PoolLike).connect === "function" && "totalCount" in connection
  );
}
