// `npx tsx bench/scaleOps.ts [--keys 1000,1000000,10000000] [--log 50000000] [--reps 15]`: issue 30's
// "speed that does not depend on history". One database grows stage by stage — 1k keys, then 1M,
// then 10M (one event each in the log; most keys idle, as finished keys leave them, with 10,000
// ready keys and 100 dead ones added per stage), then a log of 50M events (history that every
// subscription advanced past). After each bulk load the hot operations are timed one by one —
// the planner then still has the smaller database's statistics (none at the first stage), as
// after a bulk load before autovacuum has run — and again after ANALYZE. Each figure is the
// median of `reps` calls, with its ratio to the 1k-key stage's (after ANALYZE). The operations:
// a drain of 16 ready one-event keys (claim + settle), consume of one key, an append of 100 events
// to idle keys and the advance that queues them, stats (as `GET /stats`), one subscription, a
// page of keys (first, after a key in the middle, by status), and what the dashboard's pages read
// (throughput, the timeline, the log's tail, dead letters). Postgres: embedded (default settings)
// unless DATABASE_URL. The last line printed is one JSON object.
import { loadavg } from "node:os";
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";
import { createCorq, type Corq } from "../src/index.js";
import { benchClient, dropDatabase, freshDatabase } from "./database.js";
import { median } from "./stats.js";
import { present } from "../test/helpers/present.js";

const list = (name: string, fallback: number[]) => {
  const at = process.argv.indexOf(`--${name}`);
  const values =
    at >= 0
      ? String(process.argv[at + 1])
          .split(",")
          .map(Number)
      : fallback;
  if (values.some((v) => !Number.isInteger(v) || v <= 0))
    throw new Error(`--${name}: positive integers, comma-separated`);
  return values;
};
const stagesOfKeys = list("keys", [1_000, 1_000_000, 10_000_000]);
const [logEvents] = list("log", [50_000_000]);
const [reps = 15] = list("reps", [15]);
// per stage, of its new keys: ready ones (one queued event) and dead ones; the rest are idle
const readyOf = (keys: number) => Math.min(10_000, Math.floor(keys / 2));
const deadOf = (keys: number) => Math.min(100, Math.floor(keys / 10));

const fmt = (n: number) => Math.round(n).toLocaleString("en");
const load = () => present(loadavg()[0], "the load average").toFixed(1);

const embedded = process.env.DATABASE_URL ? undefined : await startEmbeddedPostgres();
const serverUrl = process.env.DATABASE_URL ?? embedded?.url ?? "";
const url = await freshDatabase(serverUrl, "scaleops");
const subscription = { name: "bench", key: "data.key", batchSize: 100, leaseMs: 60_000, handle: () => undefined };

/** An operation, timed per call; `prepare` runs before each call, untimed. */
type Op = {
  name: string;
  run: (corq: Corq, rep: number) => Promise<unknown>;
  prepare?: (corq: Corq, rep: number) => Promise<unknown>;
};
// 100 events to keys of the first half (idle but for the first stage's last ones: at 1,000 keys,
// k401–k500 are dead and take events behind their failed one), on a stream of their own
const append100 = (keys: number) => (c: Corq, rep: number) =>
  c.append(
    `live-${keys}-${rep}-${Math.random().toString(36).slice(2, 8)}`,
    Array.from({ length: 100 }, (_, i) => ({
      name: "Work",
      data: { key: `k${1 + (((rep * 100 + i) * 7919) % (keys / 2))}` },
    })),
  );
const ops = (keys: number): Op[] => [
  {
    name: "drain of 16 ready one-event keys (claim + settle)",
    run: (c) => c.drain("bench", { keysPerClaim: 16, maxBatches: 16 }),
  },
  { name: "consume one key", run: (c) => c.consume("bench") },
  // each append's events advanced before the next append (untimed), so every call appends the same way
  { name: "append of 100 events to idle keys", run: append100(keys), prepare: (c) => c.advance() },
  { name: "advance of 100 events (just appended)", run: (c) => c.advance(), prepare: append100(keys) },
  { name: "stats (GET /stats)", run: (c) => c.stats() },
  { name: "one subscription (GET /subscriptions/:name)", run: (c) => c.subscription("bench") },
  { name: "keys page, first 50", run: (c) => c.keyPage("bench", { limit: 50 }) },
  {
    name: "keys page, 50 after a key in the middle",
    run: (c) => c.keyPage("bench", { after: `k${Math.floor(keys / 2)}`, limit: 50 }),
  },
  { name: "keys page, 50 ready", run: (c) => c.keyPage("bench", { status: "ready", limit: 50 }) },
  { name: "keys page, 50 dead", run: (c) => c.keyPage("bench", { status: "dead", limit: 50 }) },
  { name: "dashboard: throughput (5 min)", run: (c) => c.throughput({ windowMs: 300_000, bucketMs: 10_000 }) },
  { name: "dashboard: timeline (1 h, 40 keys)", run: (c) => c.timeline({ sinceMs: 3_600_000, maxKeys: 40 }) },
  { name: "dashboard: log tail (100 events)", run: (c) => c.logTail({ limit: 100 }) },
  {
    name: "dashboard: dead letters (200, with events)",
    run: (c) => c.deadLetters({ subscription: "bench", limit: 200, withEvent: true }),
  },
];

/** Grows the database to `keys` keys (one event each) and, with `log`, the log to `log` events. */
async function grow(db: Awaited<ReturnType<typeof benchClient>>, from: number, keys: number, log?: number) {
  const started = performance.now();
  if (keys > from) {
    const ready = keys - readyOf(keys - from);
    const dead = ready - deadOf(keys - from);
    // new keys: the last readyOf ready (one queued event, seq 1), deadOf before them dead, the rest
    // idle (their one event acked: last_seq 1); every key's event in the log
    await db.query(`
      INSERT INTO corq.events (stream, version, name, data)
        SELECT 'scale-' || i, 0, 'Work', jsonb_build_object('key', 'k' || i) FROM generate_series(${from + 1}, ${keys}) i;
      INSERT INTO corq.keys (subscription_id, key, pending, seq, last_seq, acked, available_at, dead_at, attempts,
                             last_error, failed_position, last_position, active_at)
        SELECT s.id, e.data->>'key',
          CASE WHEN i > ${dead} THEN 1 ELSE 0 END, 1,
          CASE WHEN i > ${dead} THEN 0 ELSE 1 END,
          CASE WHEN i > ${dead} THEN 0 ELSE 1 END,
          CASE WHEN i > ${ready} THEN now() END,
          CASE WHEN i > ${dead} AND i <= ${ready} THEN now() END,
          CASE WHEN i > ${dead} AND i <= ${ready} THEN 5 ELSE 0 END,
          CASE WHEN i > ${dead} AND i <= ${ready} THEN 'Error: failed in the bench' END,
          CASE WHEN i > ${dead} AND i <= ${ready} THEN e.position END,
          e.position, now() - interval '1 hour'
        FROM corq.events e CROSS JOIN LATERAL (SELECT substr(e.stream, 7)::bigint AS i) n, corq.subscriptions s
        WHERE s.name = 'bench' AND e.stream LIKE 'scale-%' AND e.version = 0 AND n.i > ${from};
      INSERT INTO corq.queue (subscription_id, key, seq, tx, position)
        SELECT k.subscription_id, k.key, 1, e.tx, e.position FROM corq.keys k JOIN corq.events e ON e.position = k.last_position
        WHERE k.pending = 1 AND substr(k.key, 2)::bigint > ${from};`);
  }
  if (log !== undefined) {
    const { rows } = await db.query("SELECT count(*)::bigint AS n FROM corq.events");
    const more = log - Number(rows[0].n);
    // history: events every subscription advanced past, 500 per stream
    if (more > 0)
      await db.query(`
        INSERT INTO corq.events (stream, version, name, data)
          SELECT 'history-' || (i / 500), i % 500, 'Work', jsonb_build_object('key', 'k' || (1 + i % ${keys}))
          FROM generate_series(0, ${more - 1}) i`);
  }
  await db.query(`UPDATE corq.subscriptions SET (watermark_tx, watermark_position) =
      (SELECT tx, position FROM corq.events ORDER BY tx DESC, position DESC LIMIT 1) WHERE name = 'bench'`);
  return (performance.now() - started) / 1000;
}

async function measure(keys: number) {
  const corq = createCorq({ databaseUrl: url, subscriptions: [subscription], poolSize: 2 });
  const figures: Record<string, number> = {};
  try {
    for (const op of ops(keys)) {
      const times: number[] = [];
      for (let rep = 0; rep < reps; rep++) {
        await op.prepare?.(corq, rep);
        const started = performance.now();
        await op.run(corq, rep);
        times.push(performance.now() - started);
      }
      figures[op.name] = median(times);
    }
  } finally {
    await corq.close();
  }
  return figures;
}

const columns: { label: string; figures: Record<string, number>; load: string }[] = [];
try {
  const setup = createCorq({ databaseUrl: url, subscriptions: [subscription] });
  await setup.migrate();
  await setup.close();
  const db = await benchClient(url);
  let keysSoFar = 0;
  const stages: { keys: number; log?: number }[] = [
    ...stagesOfKeys.map((keys) => ({ keys })),
    { keys: present(stagesOfKeys.at(-1), "a stage"), log: logEvents },
  ];
  for (const stage of stages) {
    const seconds = await grow(db, keysSoFar, stage.keys, stage.log);
    keysSoFar = stage.keys;
    const label = stage.log ? `${fmt(stage.keys)} keys, ${fmt(stage.log)}-event log` : `${fmt(stage.keys)} keys`;
    console.log(`${label}: loaded in ${seconds.toFixed(0)} s`);
    for (const phase of ["right after the load", "after ANALYZE"]) {
      if (phase === "after ANALYZE") await db.query("ANALYZE corq.keys, corq.queue, corq.events, corq.activity");
      const loadBefore = load();
      const figures = await measure(stage.keys);
      columns.push({ label: `${label}, ${phase}`, figures, load: `${loadBefore} → ${load()}` });
      console.log(
        `  ${phase}: ${JSON.stringify(Object.fromEntries(Object.entries(figures).map(([k, v]) => [k, Number(v.toFixed(1))])))}`,
      );
    }
  }
  await db.end();
  const base = present(columns[1], "the first stage after ANALYZE").figures;
  const rows = Object.keys(base);
  console.log(
    `\n| operation (median of ${reps}, ms; × the ${columns[1]?.label} figure) | ${columns.map((c) => c.label).join(" | ")} |`,
  );
  console.log(`|---|${columns.map(() => "---").join("|")}|`);
  for (const row of rows)
    console.log(
      `| ${row} | ${columns
        .map((c) => {
          const ms = present(c.figures[row], row);
          return `${ms < 10 ? ms.toFixed(2) : fmt(ms)} (${(ms / present(base[row], row)).toFixed(1)}×)`;
        })
        .join(" | ")} |`,
    );
  console.log(`| load (1 min) | ${columns.map((c) => c.load).join(" | ")} |`);
  const rounded = columns.map((c) => ({
    ...c,
    figures: Object.fromEntries(Object.entries(c.figures).map(([k, v]) => [k, Number(v.toFixed(2))])),
  }));
  console.log(JSON.stringify({ reps, columns: rounded }));
} finally {
  await dropDatabase(serverUrl, url);
  await embedded?.stop();
}
