// `npx tsx bench/retention.ts [--events 2000000] [--queue 10000] [--chunk 5000] [--cycles 2]`: what a retention
// pass costs on a populated log, to choose between chunked deletes and partitions
// (docs/architecture.md, "Retention"). On a fresh database: `events` old events (saga-shaped,
// ~280 bytes) every subscription has advanced past, `queue` of them still queued (a backlog
// retention must keep), then per cycle one pass chunk by chunk while a probe appends and advances
// beside it, a VACUUM, and as many old events again. Prints per-chunk times, the probe's advance
// latency idle and during the pass, table and index sizes after each step; and what converting the
// same table to a partitioned one costs. Not part of `npm run bench` (it loads millions of rows).
import { performance } from "node:perf_hooks";
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";
import { createCorq } from "../src/index.js";
import { benchPool, dropDatabase, freshDatabase } from "./database.js";
import { percentile } from "./stats.js";
import { loadSagaEvents } from "./sagaLog.js";

const arg = (name: string, fallback: number) =>
  process.argv.includes(`--${name}`) ? Number(process.argv[process.argv.indexOf(`--${name}`) + 1]) : fallback;
const EVENTS = arg("events", 2_000_000);
const QUEUED = arg("queue", 10_000);
const CHUNK = arg("chunk", 5000);
const CYCLES = arg("cycles", 2);

const embedded = process.env.DATABASE_URL ? undefined : await startEmbeddedPostgres();
const serverUrl = process.env.DATABASE_URL ?? embedded?.url ?? "";
const url = await freshDatabase(serverUrl, "retention");
const raw = benchPool(url, 4);
const noop = () => undefined;
const corq = createCorq({
  databaseUrl: url,
  subscriptions: [
    { name: "by-stream", handle: noop },
    { name: "by-order", key: "data.orderId", handle: noop },
  ],
});
// the pass runs on an instance of its own, whose statements are timed: each from its send to the next send (or the call's end)
const sent: { text: string; at: number }[] = [];
const retainer = createCorq({
  databaseUrl: url,
  onStatement: (text) => void sent.push({ text, at: performance.now() }),
});
const kinds: [RegExp, string][] = [
  [/^BEGIN/, "BEGIN"],
  [/set_config\('lock_timeout'/, "settings"],
  [/^SELECT id FROM "corq"\."retention"/, "lock the policy row"],
  [/^WITH policy AS/, "remove the chunk"],
  [/FOR KEY SHARE/, "lock the subscription rows"],
  [/^SELECT EXISTS/, "check for requeued events"],
  [/^COMMIT/, "COMMIT"],
];
const statementMs = new Map<string, number[]>();
function timeStatements(end: number) {
  for (const [i, statement] of sent.entries()) {
    const kind = kinds.find(([pattern]) => pattern.test(statement.text.trim()))?.[1] ?? "read the policy";
    statementMs.set(kind, [...(statementMs.get(kind) ?? []), (sent[i + 1]?.at ?? end) - statement.at]);
  }
  sent.length = 0;
}
const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MB`;
const ms = (n: number) => `${n.toFixed(1)} ms`;

async function sizes(label: string) {
  const { rows } =
    await raw.query(`SELECT pg_table_size('corq.events') AS heap, pg_indexes_size('corq.events') AS indexes,
    (SELECT count(*) FROM corq.events) AS n,
    (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'corq.events'::regclass) AS dead,
    (SELECT string_agg(indexrelname || ' ' || pg_relation_size(indexrelid) / 1048576 || ' MB', ', ' ORDER BY indexrelname)
       FROM pg_stat_user_indexes WHERE relid = 'corq.events'::regclass) AS each`);
  const r = rows[0];
  console.log(
    `${label}: ${Number(r.n).toLocaleString("en")} events, heap ${mb(Number(r.heap))}, indexes ${mb(Number(r.indexes))} (${r.each}), dead tuples ${Number(r.dead).toLocaleString("en")}`,
  );
}

const load = (n: number, from: number, old: boolean) => loadSagaEvents(raw, n, from, old);

try {
  await corq.migrate();
  await corq.advance(); // registers the subscriptions
  console.log(`# retention pass on ${EVENTS.toLocaleString("en")} events, ${QUEUED} queued, chunks of ${CHUNK}`);
  const loadMs = await load(EVENTS, 0, true);
  console.log(`loaded in ${(loadMs / 1000).toFixed(1)} s`);
  // every subscription advanced through the log; `QUEUED` events of it still queued (a backlog)
  await raw.query(`UPDATE corq.subscriptions SET (watermark_tx, watermark_position) =
    (SELECT tx, position FROM corq.events ORDER BY tx DESC, position DESC LIMIT 1)`);
  await raw.query(
    `INSERT INTO corq.queue (subscription_id, key, seq, tx, position)
     SELECT (SELECT min(id) FROM corq.subscriptions), stream, version + 1, tx, position FROM corq.events
     WHERE position % ($1::bigint / greatest($2::bigint, 1)) = 0 LIMIT $2`,
    [EVENTS, QUEUED],
  );
  await raw.query("VACUUM ANALYZE corq.events");
  await sizes("before");

  for (let cycle = 1; cycle <= CYCLES; cycle++) {
    // the probe: an append and an advance every 20 ms; its advance's duration, idle and during the pass
    let probing = true;
    let phase: "idle" | "pass" = "idle";
    const advanceMs: Record<string, number[]> = { idle: [], pass: [] };
    let probeN = 0;
    const probe = (async () => {
      while (probing) {
        await corq.append(`probe-${cycle}-${probeN++}`, [{ name: "Probe", data: { orderId: `p${probeN}` } }]);
        const started = performance.now();
        await corq.advance();
        advanceMs[phase]?.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 3000));

    await corq.setRetention({ maxAgeMs: 86_400_000 });
    // what the probe appended so far is old by now too (time passes between two cycles)
    await raw.query("UPDATE corq.events SET created_at = now() - interval '2 days' WHERE stream LIKE 'probe-%'");
    phase = "pass";
    const chunkMs: number[] = [];
    let deleted = 0;
    const passStarted = performance.now();
    for (;;) {
      const started = performance.now();
      const run = await retainer.runRetention({ maxChunks: 1, chunkSize: CHUNK });
      const end = performance.now();
      chunkMs.push(end - started);
      timeStatements(end);
      deleted += run.deleted;
      if (run.done) break;
    }
    const passMs = performance.now() - passStarted;
    phase = "idle";
    probing = false;
    await probe;
    const p = (xs: number[], q: number) => ms(percentile(xs, q));
    console.log(
      `cycle ${cycle}: pass: ${deleted.toLocaleString("en")} deleted in ${(passMs / 1000).toFixed(1)} s (${Math.round(deleted / (passMs / 1000)).toLocaleString("en")}/s), ${chunkMs.length} chunks: p50 ${p(chunkMs, 50)}, p99 ${p(chunkMs, 99)}, max ${ms(Math.max(...chunkMs))}`,
    );
    for (const [kind, xs] of statementMs)
      console.log(`  ${kind}: p50 ${p(xs, 50)}, p99 ${p(xs, 99)}, max ${ms(Math.max(...xs))}`);
    statementMs.clear();
    for (const [label, xs] of Object.entries(advanceMs))
      console.log(
        `  probe advance (${label}): ${xs.length} runs, p50 ${p(xs, 50)}, p99 ${p(xs, 99)}, max ${ms(Math.max(...xs))}`,
      );
    await sizes("  after the pass");
    const started = performance.now();
    await raw.query("VACUUM corq.events");
    console.log(`  VACUUM: ${((performance.now() - started) / 1000).toFixed(1)} s`);
    await sizes("  after VACUUM");
    // as many events again, two days old as well: the next cycle's pass removes them
    const again = await load(deleted, EVENTS * cycle, true);
    await raw.query(`UPDATE corq.subscriptions SET (watermark_tx, watermark_position) =
      (SELECT tx, position FROM corq.events ORDER BY tx DESC, position DESC LIMIT 1)`);
    console.log(`  as many events again: ${(again / 1000).toFixed(1)} s`);
    await raw.query("VACUUM ANALYZE corq.events");
    await sizes("  after as many again (is the freed space reused?)");
  }

  // the other way: a partitioned events table (by position range), filled from this one
  let started = performance.now();
  await raw.query(
    `CREATE TABLE corq.events_partitioned (LIKE corq.events INCLUDING DEFAULTS) PARTITION BY RANGE (position)`,
  );
  const { rows } = await raw.query("SELECT max(position)::bigint AS max FROM corq.events");
  const step = 500_000;
  for (let low = 0; low <= Number(rows[0].max); low += step)
    await raw.query(
      `CREATE TABLE corq.events_p${low / step} PARTITION OF corq.events_partitioned FOR VALUES FROM (${low}) TO (${low + step})`,
    );
  await raw.query("ALTER TABLE corq.events_partitioned ADD PRIMARY KEY (position)");
  await raw.query("CREATE INDEX ON corq.events_partitioned (tx, position)");
  await raw.query("INSERT INTO corq.events_partitioned SELECT * FROM corq.events");
  console.log(
    `converting to a partitioned table (copy ${Number(rows[0].max).toLocaleString("en")} positions, 2 indexes): ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  const unique = await raw
    .query("CREATE UNIQUE INDEX ON corq.events_partitioned (stream, version)")
    .then(() => "allowed")
    .catch((error: Error) => `refused: ${error.message}`);
  console.log(`the unique (stream, version) index on it: ${unique}`);
  started = performance.now();
  await raw.query("DROP TABLE corq.events_p0");
  console.log(`dropping one partition of ${step.toLocaleString("en")} positions: ${ms(performance.now() - started)}`);
} finally {
  await corq.close();
  await retainer.close();
  await raw.end();
  await dropDatabase(serverUrl, url);
  await embedded?.stop();
}
