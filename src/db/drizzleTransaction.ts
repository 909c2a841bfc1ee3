// A transactional handler's `ctx.tx`: a drizzle transaction whose every statement goes through
// corq's Executor (the one door: counted, same errors) on the connection that holds the batch's
// transaction open. drizzle's "pg-proxy" session is driver-agnostic — it hands text and
// parameters to a callback — so one class serves node-postgres, a Neon WebSocket session and
// anything else corq can lend a connection from. BEGIN and COMMIT are corq's (the ack is the
// transaction's last statement), so this transaction only runs statements and savepoints.
import { sql } from "drizzle-orm";
import { entityKind } from "drizzle-orm/entity";
import { PgDialect, PgTransaction } from "drizzle-orm/pg-core";
import { PgRemoteSession, type PgRemoteQueryResultHKT } from "drizzle-orm/pg-proxy";
import type { Executor } from "./executor.js";

/**
 * What a transactional handler writes with (`ctx.tx`): the query builders
 * (`ctx.tx.insert(table).values(…)`, `select`, `update`, `delete`), `ctx.tx.execute(sql\`…\`)`
 * (rows), nested `ctx.tx.transaction(…)` (a savepoint) and `ctx.tx.rollback()` (throws: the
 * batch fails, nothing it wrote stays).
 */
export class CorqTransaction extends PgTransaction<PgRemoteQueryResultHKT, Record<string, never>> {
  static override readonly [entityKind]: string = "CorqTransaction";

  override async transaction<T>(fn: (tx: CorqTransaction) => Promise<T>): Promise<T> {
    const savepoint = `corq_sp${this.nestedIndex + 1}`;
    const nested = new CorqTransaction(dialect, this._.session, undefined, this.nestedIndex + 1);
    await nested.execute(sql.raw(`savepoint ${savepoint}`));
    try {
      const result = await fn(nested);
      await nested.execute(sql.raw(`release savepoint ${savepoint}`));
      return result;
    } catch (error) {
      await nested.execute(sql.raw(`rollback to savepoint ${savepoint}`));
      throw error;
    }
  }
}

const dialect = new PgDialect();

/** `ctx.tx` over `tx`, an Executor whose connection is inside a transaction corq began. */
export function drizzleTransaction(tx: Executor): CorqTransaction {
  const session = new PgRemoteSession<Record<string, never>, Record<string, never>>(
    async (text, params, method) => ({ rows: (await tx.query(text, params, method === "all")) as never[] }),
    dialect,
    undefined,
  );
  return new CorqTransaction(dialect, session, undefined);
}
