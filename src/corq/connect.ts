// The connection a Corq opens, or the one it is given.
import { CorqError } from "../errors.js";
import {
  createExecutor,
  lendsConnections,
  type Connection,
  type Executor,
  type ExecutorOptions,
  type PoolLike,
} from "../db/executor.js";
import { guardPool } from "../db/guardPool.js";
import type { CorqOptions } from "../types.js";

// A variable specifier keeps bundlers (wrangler's esbuild) from pulling node-postgres into the
// Worker, which always passes its own Neon pool as `db`.
const NODE_POSTGRES = "pg";

/**
 * corq's own pool sends unnamed statements, each planned for its parameters and the tables as
 * they are: it sets nothing on its sessions (DESIGN invariants 12 and 13). Named prepared
 * statements kept a generic plan made with the table sizes of the moment until the table was next
 * vacuumed or analyzed: one cached while the queue or the keys were empty read them with a Seq
 * Scan once a rewind or a burst had filled them (0.9–1.4 s per settle+claim over 200,000
 * requeued rows instead of ~3 ms). The session `SET enable_seqscan = off` that hid that made
 * every unavoidable seq scan cost 1e10 on PostgreSQL ≤ 17, so statements passed
 * `jit_above_cost` and were JIT-compiled (~1 s per advance() on PostgreSQL 15 with JIT on);
 * through a transaction-mode pooler a session SET leaks to other clients or is lost, and
 * PgBouncer < 1.21 has no named statements at all. Parallel scans are off per table instead
 * (drizzle/0025). What planning every statement costs: docs/architecture.md, "Statements".
 */
/** Lazily opens the connection (pg is imported on first use, so Workers never load it). */
export function connect(
  options: CorqOptions,
  statementOptions: Pick<ExecutorOptions, "onStatement" | "retries">,
): { executor: () => Promise<Executor>; end: () => Promise<void> } {
  if (options.db) {
    // a pool given here is guarded as corq's own (createExecutor: src/db/guardPool.ts)
    const db = options.db as Connection & { $client?: Connection };
    const transactional = (options.subscriptions ?? []).find((s) => s.transactional === true);
    if (transactional !== undefined && !lendsConnections(db.$client ?? db, options.session))
      throw new CorqError(
        "invalid_config",
        `subscription "${transactional.name}" is transactional: its batches need connections of their own — ` +
          "pass a pool (databaseUrl, a pg or Neon Pool, a drizzle database over one) or a neon() function with a session",
      );
    const executor = createExecutor(db.$client ?? db, { ...statementOptions, session: options.session });
    return { executor: async () => executor, end: async () => undefined };
  }
  if (!options.databaseUrl) throw new CorqError("invalid_config", "createCorq needs databaseUrl or db");
  const databaseUrl = options.databaseUrl;
  let pool: PoolLike | undefined;
  let opened: Promise<Executor> | undefined;
  const nodePostgres = (max: number) =>
    import(/* @vite-ignore */ NODE_POSTGRES).then(({ default: pg }: typeof import("pg")) => {
      // a client that loses its connection, idle or lent, never takes the process with it
      return guardPool(new pg.Pool({ connectionString: databaseUrl, max })) as unknown as PoolLike;
    });
  return {
    executor: () =>
      (opened ??=
        options.driver === "neon-http"
          ? Promise.all([import("@neondatabase/serverless"), nodePostgres(options.poolSize ?? 10)]).then(
              ([{ neon }, session]) => {
                // connections opened only when needed (pg opens them lazily and closes them after
                // 10 s idle): for the rare interactive transaction, and one per batch of a
                // transactional handler running at that moment
                pool = session;
                return createExecutor(neon(databaseUrl), { ...statementOptions, session: (use) => use(session) });
              },
            )
          : nodePostgres(options.poolSize ?? 10).then((created) => {
              pool = created;
              return createExecutor(created, statementOptions);
            })),
    end: async () => {
      await pool?.end?.();
      pool = undefined;
      opened = undefined;
    },
  };
}
