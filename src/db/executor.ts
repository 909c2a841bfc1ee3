// The one door to Postgres. Every statement corq runs goes through `Executor.run`, so the
// round-trip budget is countable (tests pin it) and drivers are interchangeable: node-postgres
// Pool/Client, the Neon serverless Pool/Client, Neon's HTTP query function (`neon()`), or a
// drizzle database/transaction.
import { sql, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { ConnectFailed, CorqError, fromDriverError } from "../errors.js";
import { guardPool, lostConnection } from "./guardPool.js";
import { DEFAULT_RETRY_WITHIN_MS, sendWithRetries, type RetryPolicy } from "./retries.js";

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

/** How a statement is sent again when it fails on a connection error (src/db/retries.ts). */
export interface RunOptions {
  /**
   * Safe to send again after an error that leaves unknown whether it committed: fenced or
   * idempotent (a settlement, a claim, an advance, a read). Default false: sent again only after
   * an error that proves it did not commit.
   */
  repeatable?: boolean;
  /** Epoch ms after which it is not sent again (default: the executor's retry window from now); 0: sent once. */
  retryUntil?: number;
  /** Called as each attempt is sent (a claim's lease clock starts at the attempt that took it). */
  onSend?: () => void;
}

export interface Executor {
  /**
   * Runs one statement and returns its rows: an unnamed statement, planned for its parameters and
   * the tables as they are (src/corq/connect.ts: why nothing is prepared). On a pool or Neon's
   * HTTP path (a new connection per statement), one that fails on a connection error is sent
   * again within the retry window (RunOptions, src/db/retries.ts); on a single connection (a
   * transaction's) it is not: that connection is gone.
   */
  run<T = Record<string, unknown>>(query: SQL, options?: RunOptions): Promise<T[]>;
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
  /** How long a statement that fails on a connection error is sent again (default: 5 s). */
  retries?: RetryPolicy;
}

export type Session = <T>(use: (pool: PoolLike) => Promise<T>) => Promise<T>;

export function createExecutor(connection: Connection, options: ExecutorOptions = {}): Executor {
  // every pool corq is given too (a user's, the Worker's Neon Pool): its clients' errors are heard
  if (isPool(connection)) guardPool(connection);
  // a statement goes out on a connection of its own (a pool's, or an HTTP request): one that
  // failed on a connection error can be sent again on another
  const resends = isHttp(connection) || isPool(connection);
  const withinMs = options.retries?.withinMs ?? DEFAULT_RETRY_WITHIN_MS;
  const retried = <T>(send: () => Promise<T>, runOptions: RunOptions = {}): Promise<T> =>
    sendWithRetries(send, {
      until: resends ? (runOptions.retryUntil ?? Date.now() + withinMs) : 0,
      repeatable: runOptions.repeatable === true,
      allowed: options.retries?.allowed,
    }).catch((error: unknown) => {
      // a lost or refused connection surfaces as CorqError("database_unavailable"), from every driver
      throw fromDriverError(error);
    });
  const run = <T>(query: SQL, runOptions?: RunOptions): Promise<T[]> =>
    retried(() => {
      runOptions?.onSend?.();
      return send<T>(query);
    }, runOptions);
  const send = async <T>(query: SQL): Promise<T[]> => {
    const { sql: text, params } = dialect.sqlToQuery(query);
    options.onStatement?.(text);
    if (isHttp(connection)) return (await connection.query(text, params)) as T[];
    if (isQueryable(connection)) {
      const config = { text, values: params };
      if (!isPool(connection)) return (await connection.query(config)).rows as T[];
      // what pool.query does, with a connection that died before it was lent counted as a failed connect
      const client = await connectOnce(connection);
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

  // drizzle's statements (a transactional handler's ctx.tx, on its transaction's connection): never repeatable
  const query = (text: string, params: unknown[], arrayMode: boolean): Promise<unknown[]> =>
    retried(() => sendText(text, params, arrayMode));
  const sendText = async (text: string, params: unknown[], arrayMode: boolean): Promise<unknown[]> => {
    options.onStatement?.(text);
    if (isHttp(connection)) return (await connection.query(text, params, { arrayMode })) as unknown[];
    if (!isQueryable(connection))
      throw new CorqError("invalid_config", "drizzle queries need a pg or Neon pool or client as the connection");
    const client = isPool(connection) ? await connectOnce(connection) : undefined;
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
      return options.session((pool) =>
        createExecutor(pool, { onStatement: options.onStatement, retries: options.retries }).transaction(fn),
      );
    }
    if (!isPool(connection)) return inTransaction(createExecutor(connection, options), fn);
    // only the connect step is sent again: inside, the transaction lives and dies with its connection
    const client = await retried(() => connectOnce(connection));
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
 * Gets a pooled connection, or throws ConnectFailed: nothing was sent, so the caller's retry
 * (src/db/retries.ts) may ask for another whatever the statement. That includes a connection that
 * died before it reached the caller (a FATAL read with its ReadyForQuery: src/db/guardPool.ts): it
 * goes back to the pool with its error (destroyed). Wrong credentials or a missing database
 * (SQLSTATE 28xxx, 3D000) are thrown as they are: they stay so however often they are tried.
 */
async function connectOnce<C extends { release(err?: unknown): void }>(pool: { connect(): Promise<C> }): Promise<C> {
  let client: C;
  try {
    client = await pool.connect();
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (typeof code === "string" && /^(28|3D)/.test(code)) throw error;
    throw new ConnectFailed(error);
  }
  const lost = lostConnection(client);
  if (lost === undefined) return client;
  client.release(lost);
  throw new ConnectFailed(lost);
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
