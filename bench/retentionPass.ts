// A retention pass over a large log beside live traffic (issue 30: "a retention pass deleting 10M
// events: appends and deliveries keep their p99 within 2× of idle"). A log of N saga-shaped
// events two days old (bench/sagaLog.ts), then live single-event appends at a fixed rate that a
// subscription of their own takes (bench/liveProbe.ts), in three phases:
//   before   no policy: the idle figures;
//   pass     a policy of one day, and passes as serve runs them (CORQ_RETENTION_CHUNKS = 100
//            chunks of 2,000 events each, one short transaction per chunk; one that left more
//            goes on at the next safety-net tick, 5 s after the last began) until the log's old
//            part is gone: the pace of a serve whose every tick finds more to remove;
//   after    no pass any more (autovacuum at work on the removed rows, as it would be).
// Beside it, the events table's size and dead tuples before and after.
import type pg from "pg";
import { createCorq } from "../src/index.js";
import { benchPool } from "./database.js";
import { loadSagaEvents } from "./sagaLog.js";
import { startLiveProbe, type LivePhase } from "./liveProbe.js";
import { percentile } from "./stats.js";
import { sleep } from "./workload.js";

export interface RetentionPassOptions {
  events: number;
  /** Live appends per second. */
  rate: number;
  /** The idle phases' length (before and after the pass). */
  idleSeconds: number;
  /** Chunks per pass (serve's CORQ_RETENTION_CHUNKS; default 100, its default): fewer is a slower pass. */
  chunks?: number;
}

export interface EventsTable {
  rows: number;
  heapBytes: number;
  indexBytes: number;
  deadTuples: number;
}

export interface RetentionPassResult {
  loadMs: number;
  before: LivePhase;
  pass: LivePhase;
  after: LivePhase;
  deleted: number;
  passMs: number;
  /** runRetention calls (each at most `chunks` chunks) */
  passes: number;
  /** WAL written during the pass (the whole cluster's: the live traffic's is a small part) */
  walBytes: number;
  /** checkpoints during the pass (timed or requested by the WAL's size) */
  checkpoints: number;
  /** the chunks' transactions, each timed from BEGIN's send to COMMIT's */
  chunkP50Ms: number;
  chunkP99Ms: number;
  chunkMaxMs: number;
  loaded: EventsTable;
  removed: EventsTable;
}

const DAY_MS = 86_400_000;
const PASS_CHUNKS = 100; // serve's CORQ_RETENTION_CHUNKS default
const SAFETY_NET_MS = 5000; // serve's CORQ_SAFETY_NET_MS default

export async function retentionPass(databaseUrl: string, o: RetentionPassOptions): Promise<RetentionPassResult> {
  const admin = benchPool(databaseUrl, 2);
  // each chunk is BEGIN … COMMIT: its span, from BEGIN's send to COMMIT's (its commit is asynchronous)
  let begun = 0;
  const chunkMs: number[] = [];
  const retainer = createCorq({
    databaseUrl,
    poolSize: 2,
    onStatement: (text) => {
      if (text.startsWith("BEGIN")) begun = performance.now();
      else if (text.startsWith("COMMIT") || text.startsWith("ROLLBACK")) chunkMs.push(performance.now() - begun);
    },
  });
  try {
    await retainer.migrate();
    const loadMs = await loadSagaEvents(admin, o.events, 0, true);
    await admin.query("VACUUM ANALYZE corq.events");
    // the bulk load's dirty pages written now: a checkpoint they force must not fall in the idle
    // phase (measured: it alone took the idle p99 from ~20 to 100–300 ms) nor count as the pass's
    await admin.query("CHECKPOINT");
    const loaded = await eventsTable(admin);
    const probe = await startLiveProbe(databaseUrl, { name: "live", rate: o.rate });
    try {
      await probe.phase(5, () => true); // warm-up: connections, plans (not counted)
      const before = await probe.phase(o.idleSeconds, () => true);
      await retainer.setRetention({ maxAgeMs: DAY_MS });
      let deleted = 0;
      let passes = 0;
      let passMs = 0;
      let ended = false;
      chunkMs.length = 0; // the migration's transaction
      const walBefore = await walPosition(admin);
      const passing = (async () => {
        const started = performance.now();
        // serve starts a pass that left more at its next safety-net tick (SAFETY_NET_MS apart)
        for (let tick = started; ; ) {
          const run = await retainer.runRetention({ maxChunks: o.chunks ?? PASS_CHUNKS });
          passes++;
          deleted += run.deleted;
          if (run.done) break;
          while (tick <= performance.now()) tick += SAFETY_NET_MS;
          await sleep(tick - performance.now());
        }
        passMs = performance.now() - started;
      })().finally(() => {
        ended = true;
      });
      const pass = await probe.phase(1, () => ended);
      await passing;
      const walAfter = await walPosition(admin);
      const after = await probe.phase(o.idleSeconds, () => true);
      const removed = await eventsTable(admin);
      return {
        loadMs,
        before,
        pass,
        after,
        deleted,
        passMs,
        passes,
        walBytes: walAfter.lsn - walBefore.lsn,
        checkpoints: walAfter.checkpoints - walBefore.checkpoints,
        chunkP50Ms: percentile(chunkMs, 50),
        chunkP99Ms: percentile(chunkMs, 99),
        chunkMaxMs: Math.max(...chunkMs),
        loaded,
        removed,
      };
    } finally {
      await probe.stop();
    }
  } finally {
    await retainer.close();
    await admin.end();
  }
}

async function eventsTable(admin: pg.Pool): Promise<EventsTable> {
  const { rows } = await admin.query(`SELECT
      (SELECT count(*) FROM corq.events)::bigint AS rows,
      pg_table_size('corq.events') AS heap, pg_indexes_size('corq.events') AS indexes,
      (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'corq.events'::regclass) AS dead`);
  const r = rows[0] as { rows: string; heap: string; indexes: string; dead: string };
  return { rows: Number(r.rows), heapBytes: Number(r.heap), indexBytes: Number(r.indexes), deadTuples: Number(r.dead) };
}

/** The cluster's WAL position (bytes) and its checkpoints so far (pg_stat_checkpointer from PG 17, pg_stat_bgwriter before). */
async function walPosition(admin: pg.Pool): Promise<{ lsn: number; checkpoints: number }> {
  const version = Number((await admin.query("SHOW server_version_num")).rows[0].server_version_num);
  const checkpoints =
    version >= 170000
      ? "SELECT num_timed + num_requested AS n FROM pg_stat_checkpointer"
      : "SELECT checkpoints_timed + checkpoints_req AS n FROM pg_stat_bgwriter";
  const { rows } = await admin.query(
    `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS lsn, (${checkpoints})::bigint AS checkpoints`,
  );
  return { lsn: Number(rows[0].lsn), checkpoints: Number(rows[0].checkpoints) };
}
