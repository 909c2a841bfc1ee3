// A handler's context for a unit test, with no database: the real context's members, and a record
// of what the handler did with them. `ctx.run(sql\`…\`)` is rendered as corq renders it (drizzle's
// Postgres dialect: text with $1, $2 … and the parameters); `ctx.tx` (transactional handlers) is a
// real drizzle transaction (src/db/drizzleTransaction.ts) whose statements are recorded the same
// way — query builders, execute, savepoints. What a statement returns is the test's to say.
import type { SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { drizzleTransaction } from "../db/drizzleTransaction.js";
import type { Executor } from "../db/executor.js";
import type { Corq, HandlerContext, TransactionalHandlerContext } from "../types.js";
import { standInCorq, type RecordedAppend } from "./standInCorq.js";

export type { RecordedAppend };

/** One statement the handler sent: through `ctx.run`, or through `ctx.tx` (drizzle). */
export interface RecordedStatement {
  via: "run" | "tx";
  /** The text Postgres would get, with $1, $2 … placeholders. */
  sql: string;
  params: unknown[];
}

/**
 * What each statement returns, as rows: a list (the rows of the 1st statement, the 2nd …; `[]`
 * past its end), or a function of the statement and its index (0-based, over `ctx.run` and
 * `ctx.tx` together) — it may throw, to test how the handler takes a failed statement. Rows are
 * objects; for a drizzle query builder's select or `returning`, an object's values are taken in
 * the order written (the selected columns' order), or give the row as an array.
 */
export type StatementResults =
  | unknown[][]
  | ((statement: RecordedStatement, index: number) => unknown[] | Promise<unknown[]>);

export interface HandlerContextOptions {
  /** Default "test-subscription". */
  subscription?: string;
  /** Default "test-key". */
  key?: string;
  /** Default 1. */
  attempt?: number;
  /** Default "test-incarnation". */
  incarnation?: string;
  /** Default: a signal that never aborts. Abort your own controller's to test a lease that expires. */
  signal?: AbortSignal;
  /** true: `ctx.tx` is there, as in a `transactional: true` subscription (default false: no `tx`). */
  transactional?: boolean;
  results?: StatementResults;
  /**
   * `ctx.corq`: by default a stand-in whose `append` and `readStream` work in memory (recorded in
   * `ctx.appended`) and whose other methods throw; methods given here replace the stand-in's —
   * or pass a real corq.
   */
  corq?: Partial<Corq>;
}

/** The context a handler gets, plus what it did with it. */
export interface TestHandlerContext extends HandlerContext {
  /** Every statement sent through `ctx.run` and `ctx.tx`, in order. */
  readonly statements: RecordedStatement[];
  /** Every append through the stand-in `ctx.corq` (not kept when `corq` is a real one). */
  readonly appended: RecordedAppend[];
}

const dialect = new PgDialect();

export function handlerContext(
  options: HandlerContextOptions & { transactional: true },
): TestHandlerContext & TransactionalHandlerContext;
export function handlerContext(options?: HandlerContextOptions): TestHandlerContext;
export function handlerContext(options: HandlerContextOptions = {}): TestHandlerContext {
  const statements: RecordedStatement[] = [];
  const appended: RecordedAppend[] = [];
  const answer = async (statement: RecordedStatement): Promise<unknown[]> => {
    const index = statements.push(statement) - 1;
    const { results } = options;
    if (typeof results === "function") return results(statement, index);
    return results?.[index] ?? [];
  };
  const run = async <T>(query: SQL): Promise<T[]> => {
    const { sql, params } = dialect.sqlToQuery(query);
    return (await answer({ via: "run", sql, params })) as T[];
  };
  // What `ctx.tx` sends its statements through: drizzle reads a select's rows as arrays (arrayMode)
  const recorder: Executor = {
    run: (query) => run(query),
    async query(sql, params, arrayMode) {
      const rows = await answer({ via: "tx", sql, params });
      return arrayMode ? rows.map((row) => (Array.isArray(row) ? row : Object.values(row as object))) : rows;
    },
    transaction: (fn) => fn(recorder),
  };
  const given = options.corq;
  const corq = given !== undefined && isWhole(given) ? given : standInCorq(appended, given);
  return {
    subscription: options.subscription ?? "test-subscription",
    incarnation: options.incarnation ?? "test-incarnation",
    key: options.key ?? "test-key",
    attempt: options.attempt ?? 1,
    signal: options.signal ?? new AbortController().signal,
    corq,
    run,
    ...(options.transactional ? { tx: drizzleTransaction(recorder) } : {}),
    statements,
    appended,
  };
}

/** A real corq (or a complete double): used as it is. */
function isWhole(corq: Partial<Corq>): corq is Corq {
  return typeof corq.append === "function" && typeof corq.consume === "function" && typeof corq.close === "function";
}
