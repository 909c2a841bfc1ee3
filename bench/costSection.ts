// `npm run bench -- --only cost [--cost-events n] [--cost-keys n] [--cost-kpc 1,4,16]
// [--events-per-append n] [--cost-producers n] [--burst n --burst-gap-ms ms]`: dollars per million events on Workers + Neon for
// each keysPerClaim (bench/cost.ts measures, bench/prices.ts prices), with the usage beside them.
import * as priceList from "./prices.js";
import { costPerMillion, measureCost, startCostCluster, type CostRun } from "./cost.js";

const arg = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? (process.argv[at + 1] ?? fallback) : fallback;
};
const positive = (name: string, fallback: number) => {
  const value = Number(arg(name, String(fallback)));
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name}: a positive integer`);
  return value;
};

const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en", { minimumFractionDigits: digits, maximumFractionDigits: digits });
const usd = (n: number) => `$${n < 0.01 ? n.toFixed(4) : n.toFixed(3)}`;

export async function costSection({ quick, say }: { quick: boolean; say: (line: string) => void }) {
  const events = positive("cost-events", quick ? 20_000 : 1_000_000);
  const keys = positive("cost-keys", 10_000);
  const eventsPerAppend = positive("events-per-append", 1);
  const producers = positive("cost-producers", 16);
  const burst = process.argv.includes("--burst")
    ? { size: positive("burst", 64), gapMs: positive("burst-gap-ms", 1000) }
    : undefined;
  const kpcs = arg("cost-kpc", "1,4,16").split(",").map(Number);
  if (kpcs.some((k) => !Number.isInteger(k) || k < 1 || k > 256)) throw new Error("--cost-kpc: integers 1–256");
  const { prices, HISTORY_DAYS } = priceList;

  say(
    `${fmt(events)} events over ${fmt(keys)} keys (streams), ${eventsPerAppend === 1 ? "single-event appends" : `${eventsPerAppend} events per append`} ${burst ? `in bursts: ${burst.size} at once (each to another key), a burst every ${fmt(burst.gapMs)} ms` : `from ${producers} concurrent producers`} over HTTP, each key's events in order; ` +
      "one code subscription (a no-op handler in the Worker) and one push subscription (a receiver in the bench process) take every event; batch size 100 (the default), CORQ_CONCURRENCY 8, consumer budget 10 s, the cron every minute. " +
      "Each configuration on a fresh database and a fresh local Workers stack (wrangler dev: workerd, the Neon driver over the local HTTP SQL endpoint), on the section's own embedded Postgres 18 with pg_stat_statements loaded. " +
      (events < 1_000_000
        ? `**Per-event figures are scaled to a million events from ${fmt(events)}** (${fmt(events / keys, 1)} events per key; at a million over ${fmt(keys)} keys a key gets ${fmt(1_000_000 / keys)}, so batches could fill more than here: the consumers' share per event would be at most this).\n`
        : "\n"),
  );
  say(
    "How each figure is measured: **invocations** counted in the Worker's isolate by kind (bench/costWorker.ts); **Worker CPU** = workerd's process CPU time (/proc utime + stime) over the run ÷ events — measured in workerd, but the whole runtime process (its HTTP server, sockets, V8's threads), so an upper bound of the isolate CPU time Cloudflare bills; " +
      "**subrequests** = HTTP SQL requests + WebSocket sessions + push deliveries + SELF invocations; **statements** and their execution time from pg_stat_statements (top level, the monitor's own left out); " +
      "**database CPU** = the Postgres cluster's process CPU time (/proc: postmaster, backends, background workers; the monitor's backend subtracted); **WAL** = pg_current_wal_lsn moved; **growth** = pg_database_size after − before (the log, key rows, the emptied queue's dead rows).\n",
  );
  say(
    "| keysPerClaim | invocations / event (append + consumer + cron + other) | Worker CPU ms / invocation | Worker CPU ms / event | subrequests / invocation | statements / event | statement ms / event | database CPU ms / event | WAL bytes / event | log bytes / event (growth) | seconds (appends) | load start → end |\n|---|---|---|---|---|---|---|---|---|---|---|---|",
  );
  const cluster = await startCostCluster();
  const runs: CostRun[] = [];
  try {
    for (const keysPerClaim of kpcs) {
      const run = await measureCost(
        cluster.url,
        { events, keys, keysPerClaim, eventsPerAppend, producers, burst, maxMinutes: Math.max(10, events / 1000) },
        (line) => console.error(line),
      );
      runs.push(run);
      const c = costPerMillion(run, priceList);
      const kind = (name: string) => fmt(c.perEvent.byKind[name] ?? 0, 4);
      say(
        `| ${keysPerClaim}${run.complete ? "" : " (not done in time)"} | ${fmt(c.perEvent.invocations, 4)} (${kind("append")} + ${kind("consumer")} + ${kind("cron")} + ${fmt((c.perEvent.byKind.other ?? 0) + (c.perEvent.byKind.horizonRetry ?? 0) + (c.perEvent.byKind.retention ?? 0) + (c.perEvent.byKind.dispatch ?? 0), 4)}) | ${fmt(c.perInvocation.cpuMs, 2)} | ${fmt(c.perEvent.cpuMs, 3)} | ${fmt(c.perInvocation.subrequests, 1)} | ${fmt(c.perEvent.statements, 3)} | ${fmt(c.perEvent.statementMs, 3)} | ${fmt(c.perEvent.databaseCpuMs, 3)} | ${fmt(c.perEvent.walBytes)} | ${fmt(c.perEvent.logBytes)} (${fmt(c.perEvent.growthBytes)}) | ${fmt(run.seconds)} (${fmt(run.appendSeconds)}) | ${run.load.start.toFixed(1)} → ${run.load.end.toFixed(1)} |`,
      );
    }
  } finally {
    await cluster.stop();
  }

  say(
    `\nPriced per million events (marginal list prices, no included usage; bench/prices.ts, read ${prices.workersCpu.read}): Workers requests ${usd(prices.workersRequests.usd)}/M (inbound only: appends and cron triggers; SELF invocations are not billed as requests), Workers CPU ${usd(prices.workersCpu.usd)}/M CPU-ms (${prices.workersCpu.source}); Neon compute ${usd(prices.neonComputeLaunch.usd)}/CU-hour on Launch (${usd(prices.neonComputeScale.usd)} on Scale) taken as one CU-second per CPU-second the cluster used — the floor, an autoscaled compute busy only for that; storage ${usd(prices.neonStorage.usd)}/GB-month on the log's bytes (the events table with its indexes: what stays once the queue is empty and idle key rows are compacted) for each month the events are kept; history ${usd(prices.neonHistory.usd)}/GB-month on the WAL, held ${HISTORY_DAYS} day (${prices.neonStorage.source}).\n`,
  );
  say(
    "| keysPerClaim | $ / 1M events (Launch) | Workers requests | Workers CPU | Neon compute (Launch; Scale) | Neon storage, per month kept | Neon history | dominant | out of order (push) |\n|---|---|---|---|---|---|---|---|---|",
  );
  const json: Record<string, unknown> = {};
  for (const run of runs) {
    const c = costPerMillion(run, priceList);
    const d = c.dollars;
    say(
      `| ${run.workload.keysPerClaim} | **${usd(c.total)}** | ${usd(d.workersRequests)} | ${usd(d.workersCpu)} | ${usd(d.neonCompute)}; ${usd(d.neonComputeScale)} | ${usd(d.storagePerMonth)} | ${usd(d.history)} | ${c.dominant} | ${run.violations} |`,
    );
    json[`kpc${run.workload.keysPerClaim}`] = {
      usd_per_million: Number(c.total.toFixed(4)),
      usd: Object.fromEntries(Object.entries(d).map(([k, v]) => [k, Number(v.toFixed(5))])),
      invocations_per_million: Math.round(c.perEvent.invocations * 1e6),
      invocations_per_million_by_kind: Object.fromEntries(
        Object.entries(c.perEvent.byKind).map(([k, v]) => [k, Math.round(v * 1e6)]),
      ),
      cpu_ms_per_invocation: Number(c.perInvocation.cpuMs.toFixed(3)),
      cpu_ms_per_event: Number(c.perEvent.cpuMs.toFixed(4)),
      statements_per_event: Number(c.perEvent.statements.toFixed(4)),
      database_cpu_ms_per_event: Number(c.perEvent.databaseCpuMs.toFixed(4)),
      complete: run.complete,
      violations: run.violations,
      seconds: Math.round(run.seconds),
      load: run.load,
      top_statements: run.topStatements,
      raw: { ...run, topStatements: undefined },
    };
  }
  const first = runs[0];
  if (first) {
    say("\nThe statements that took the most execution time (first configuration):");
    for (const s of first.topStatements) say(`- ${fmt(s.ms)} ms in ${fmt(s.calls)} calls: \`${s.query}…\``);
  }
  return json;
}
