// The connection a Corq opens, or the one it is given.
import { CorqError } from "../errors.js";
import { createExecutor, lendsConnections, type Connection, type Executor, type PoolLike } from "../db/executor.js";
import type { CorqOptions } from "../types.js";

// A variable specifier keeps bundlers (wrangler's esbuild) from pulling node-postgres into the
// Worker, which always passes its own Neon pool as `db`.
const NODE_POSTGRES = "pg";

/**
 * The session settings of corq's own pool, whose statements are named prepared statements: after
 * five runs Postgres plans one for any parameters (a generic plan) with the table sizes of that
 * moment, and keeps it until the table is next vacuumed or analyzed. A plan cached while the queue
 * (or the keys table) was empty after a vacuum reads it with a Seq Scan, which costs nothing on an
 * empty table — and keeps reading it that way once a rewind or a burst has filled it: 0.9–1.4 s per
 * settle+claim over 200,000 requeued rows instead of ~3 ms, until autovacuum came round (the replay
 * bench's live p50 went from ~70 ms to seconds). Without Seq Scans every hot statement has one
 * plan at any size: its index (each names its rows in an index condition; test/plans.int.test.ts
 * checks the plans cached on vacuumed empty tables too). A table with no usable index is still
 * read whole: this only takes away the choice.
 * No parallel workers either: corq's statements read a few rows by index, and a parallel plan
 * comes only from an estimate gone wrong (statistics of a smaller table), where starting the
 * workers is most of the time — a page of dead keys took 12–20 ms that way, 1–2 ms without
 * (bench/scaleOps.ts at 1M keys right after a bulk load).
 */
export const PLANNER_SETTINGS = "SET enable_seqscan = off; SET max_parallel_workers_per_gather = 0";

/** Lazily opens the connection (pg is imported on first use, so Workers never load it). */
export function connect(options: CorqOptions): { executor: () => Promise<Executor>; end: () => Promise<void> } {
  const statementOptions = { onStatement: options.onStatement };
  if (options.db) {
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
      const created = new pg.Pool({ connectionString: databaseUrl, max });
      // An idle client that loses its connection emits 'error'; the pool replaces it.
      created.on("error", () => undefined);
      // Sent before the client's first statement (a client runs its queries in order).
      created.on("connect", (client) => void client.query(PLANNER_SETTINGS).catch(() => undefined));
      return created as unknown as PoolLike;
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
              return createExecutor(created, { ...statementOptions, prepare: true });
            })),
    end: async () => {
      await pool?.end?.();
      pool = undefined;
      opened = undefined;
    },
  };
}
