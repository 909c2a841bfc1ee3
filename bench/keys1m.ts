// `npx tsx bench/keys1m.ts [--keys 1000000] [--seconds 10] [--consumers 8] [--keys-per-claim 16]`:
// the "1M keys × 1 event" row of the consume stage alone, right after the load AND after
// ANALYZE (issue 30: a claim whose plan needs fresh statistics is a bug). The keys are loaded
// in bulk — one event, one queue row and one ready key row each, as an advance leaves them — so
// the first time box starts with no statistics on any table; then the same consumers drain for
// a time box, ANALYZE runs, and they drain for another. Each box prints events/s, the machine's
// load average and whether the planner had statistics of the keys table at its start and end
// (autovacuum may ANALYZE on its own during a box: it is reported, not prevented), and this
// process's CPU per event (the consumers' share of the machine). The last line printed is one
// JSON object. Postgres: embedded (default settings) unless DATABASE_URL.
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";
import { createCorq } from "../src/index.js";
import { benchClient, dropDatabase, freshDatabase } from "./database.js";
import { loadAverages, positiveFlag } from "./flags.js";

const keys = positiveFlag("keys", 1_000_000);
const seconds = positiveFlag("seconds", 10);
const consumers = positiveFlag("consumers", 8);
const keysPerClaim = positiveFlag("keys-per-claim", 16);

const fmt = (n: number) => Math.round(n).toLocaleString("en");

const embedded = process.env.DATABASE_URL ? undefined : await startEmbeddedPostgres();
const serverUrl = process.env.DATABASE_URL ?? embedded?.url ?? "";
const url = await freshDatabase(serverUrl, "keys1m");
const subscription = { name: "bench", key: "data.key", batchSize: 100, leaseMs: 60_000, handle: () => undefined };
try {
  const loader = createCorq({ databaseUrl: url, subscriptions: [subscription] });
  await loader.migrate();
  await loader.close();
  const db = await benchClient(url);
  const loadStarted = performance.now();
  // what appends and advances of one event per key leave: the events, one ready key row and one
  // queue row (seq 1) per key, and the watermark at the head of the log
  await db.query(`
    INSERT INTO corq.events (stream, version, name, data)
      SELECT 'producer-' || i, 0, 'Work', jsonb_build_object('key', 'k' || i, 'seq', 0) FROM generate_series(1, ${keys}) i;
    INSERT INTO corq.keys (subscription_id, key, pending, seq, available_at)
      SELECT s.id, e.data->>'key', 1, 1, now() FROM corq.events e, corq.subscriptions s WHERE s.name = 'bench';
    INSERT INTO corq.queue (subscription_id, key, seq, tx, position)
      SELECT s.id, e.data->>'key', 1, e.tx, e.position FROM corq.events e, corq.subscriptions s WHERE s.name = 'bench';
    UPDATE corq.subscriptions SET (watermark_tx, watermark_position) =
      (SELECT tx, position FROM corq.events ORDER BY tx DESC, position DESC LIMIT 1) WHERE name = 'bench';`);
  console.log(`loaded ${fmt(keys)} keys × 1 event in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s`);

  const hasStatistics = async () =>
    Number(
      (await db.query("SELECT count(*) AS n FROM pg_stats WHERE schemaname = 'corq' AND tablename = 'keys'")).rows[0].n,
    ) > 0;
  const box = async (label: string) => {
    const before = { statistics: await hasStatistics(), load: loadAverages() };
    const drains = Array.from({ length: consumers }, () =>
      createCorq({ databaseUrl: url, subscriptions: [subscription], poolSize: 1 }),
    );
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const drained = await Promise.all(drains.map((c) => c.drain("bench", { budgetMs: seconds * 1000, keysPerClaim })));
    const elapsed = (performance.now() - started) / 1000;
    // this process's CPU (the consumers' side: statements built and sent, rows decoded, handlers
    // and their signals, the activity record): it shares the machine with Postgres
    const cpu = process.cpuUsage(cpuBefore);
    await Promise.all(drains.map((c) => c.close()));
    const events = drained.reduce((sum, d) => sum + d.events, 0);
    const result = {
      label,
      eps: Math.round(events / elapsed),
      events,
      seconds: Number(elapsed.toFixed(1)),
      nodeCpuMsPerEvent: Number(((cpu.user + cpu.system) / 1000 / Math.max(events, 1)).toFixed(3)),
      statisticsAtStart: before.statistics,
      statisticsAtEnd: await hasStatistics(),
      loadAtStart: before.load,
      loadAtEnd: loadAverages(),
    };
    console.log(
      `${label}: ${fmt(result.eps)} events/s (${fmt(events)} in ${result.seconds} s; this process's CPU ${result.nodeCpuMsPerEvent} ms per event; statistics of keys at start/end: ` +
        `${result.statisticsAtStart}/${result.statisticsAtEnd}; load ${result.loadAtStart} → ${result.loadAtEnd})`,
    );
    return result;
  };
  const fresh = await box("right after the load");
  await db.query("ANALYZE corq.keys, corq.queue, corq.events");
  const analyzed = await box("after ANALYZE");
  await db.end();
  console.log(JSON.stringify({ keys, seconds, consumers, keysPerClaim, fresh, analyzed }));
} finally {
  await dropDatabase(serverUrl, url);
  await embedded?.stop();
}
