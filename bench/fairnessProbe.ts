// `npx tsx bench/fairnessProbe.ts [--events n] [--pairs n] [--plan-cache-mode m]`: where A's drain
// and advance spend their time with `tenant` and without it — the fairness section's "A alone"
// phase (bench/fairness.ts) on a cluster of its own with pg_stat_statements (planning tracked),
// tenant on and off alternated; per run the statements of the advance and of the drain by total
// time (and how often each was planned), the drain's CPU (this process, the cluster) and what
// the busy backends waited on. Prints; writes nothing.
import { loadavg } from "node:os";
import type pg from "pg";
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";
import { benchClient, dropDatabase, freshDatabase } from "./database.js";
import { positiveFlag } from "./flags.js";
import { fairnessRun } from "./fairness.js";
import { descendantsCpuMs } from "./processCpu.js";

const events = positiveFlag("events", 100_000);
const pairs = positiveFlag("pairs", 2);
// `--plan-cache-mode force_custom_plan|force_generic_plan`: the consumers' sessions plan every
// statement afresh, or always use the cached generic plan (default: Postgres chooses)
const planCacheMode = process.argv.includes("--plan-cache-mode")
  ? process.argv[process.argv.indexOf("--plan-cache-mode") + 1]
  : undefined;
if (planCacheMode !== undefined && !["force_custom_plan", "force_generic_plan", "auto"].includes(planCacheMode))
  throw new Error("--plan-cache-mode: force_custom_plan, force_generic_plan or auto");

interface StatementRow {
  query: string;
  calls: string;
  total: number;
  mean: number;
  plans: string;
  plan: number;
  blocks: string;
  wal: string;
}

/** The corq statements since the last reset, by total time, then reset. */
async function statements(admin: pg.Client): Promise<StatementRow[]> {
  const { rows } = await admin.query<StatementRow>(`
    SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS query, calls,
      round(total_exec_time::numeric, 0)::float AS total, round(mean_exec_time::numeric, 2)::float AS mean,
      plans, round(mean_plan_time::numeric, 2)::float AS plan,
      round((shared_blks_hit + shared_blks_read)::numeric / calls, 1)::text AS blocks,
      round(wal_bytes / calls, 0)::text AS wal
    FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND query ~* 'corq' ORDER BY total_exec_time DESC LIMIT 6`);
  await admin.query("SELECT pg_stat_statements_reset()");
  return rows;
}

const cluster = await startEmbeddedPostgres({
  settings: {
    shared_preload_libraries: "pg_stat_statements",
    "pg_stat_statements.track": "top",
    "pg_stat_statements.track_planning": "on",
  },
});
try {
  for (let i = 0; i < pairs * 2; i++) {
    const tenant = i % 4 === 0 || i % 4 === 3;
    const url = await freshDatabase(cluster.url, "fairprobe");
    const seen: Record<string, StatementRow[]> = {};
    // what the busy backends wait on during the drain, sampled every 10 ms on a connection of its own
    const waits = new Map<string, number>();
    let sampling = false;
    // CPU over the drain: this process (the consumers, the handlers) and the cluster's processes
    let cpuAt = { node: 0, postgres: 0 };
    const cpu = () => {
      const own = process.cpuUsage();
      return { node: (own.user + own.system) / 1000, postgres: descendantsCpuMs("postgres") };
    };
    let drainCpu = { node: 0, postgres: 0 };
    let sampler: Promise<void> = Promise.resolve();
    const sample = async () => {
      const probe = await benchClient(url);
      try {
        while (sampling) {
          const { rows } = await probe.query<{ wait: string }>(
            `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS wait FROM pg_stat_activity
             WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()`,
          );
          for (const { wait } of rows) waits.set(wait, (waits.get(wait) ?? 0) + 1);
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      } finally {
        await probe.end();
      }
    };
    try {
      const run = await fairnessRun(url, {
        events,
        keys: Math.round(events / 10),
        quietEvents: 0,
        quietKeys: 1,
        quietRate: 1,
        consumers: 8,
        keysPerClaim: 16,
        tenant,
        at: async (stage, admin) => {
          if (stage === "appended") {
            await admin.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
            await admin.query("SELECT pg_stat_statements_reset()");
            // the consumers connect after this: their sessions take it
            if (planCacheMode)
              await admin.query(
                `ALTER DATABASE ${new URL(url).pathname.slice(1)} SET plan_cache_mode = ${planCacheMode}`,
              );
          } else seen[stage] = await statements(admin);
          if (stage === "queued") {
            cpuAt = cpu();
            sampling = true;
            sampler = sample();
          } else if (stage === "handled") {
            const now = cpu();
            drainCpu = { node: now.node - cpuAt.node, postgres: now.postgres - cpuAt.postgres };
            sampling = false;
            await sampler;
          }
        },
      });
      console.log(
        `\n## tenant ${tenant ? "on" : "off"}: drain ${Math.round(run.drainEps)} events/s, advance ${Math.round(run.advanceEps)} events/s, load ${run.loadStart.toFixed(1)} → ${(loadavg()[0] ?? 0).toFixed(1)}`,
      );
      for (const [stage, rows] of Object.entries(seen)) {
        console.log(
          `${stage === "queued" ? "advance" : "drain"}: calls | total ms | mean ms | plans (mean ms) | blocks/call | WAL bytes/call | statement`,
        );
        for (const r of rows)
          console.log(
            `  ${r.calls} | ${r.total} | ${r.mean} | ${r.plans} (${r.plan}) | ${r.blocks} | ${r.wal} | ${r.query}`,
          );
      }
      console.log(
        `drain CPU: this process ${Math.round(drainCpu.node)} ms, Postgres ${Math.round(drainCpu.postgres)} ms (${((drainCpu.node * 1000) / events).toFixed(1)} / ${((drainCpu.postgres * 1000) / events).toFixed(1)} µs per event)`,
      );
      const samples = [...waits.values()].reduce((a, b) => a + b, 0);
      console.log(
        `drain, active backends by wait (${samples} samples): ${[...waits.entries()]
          .sort((a, b) => b[1] - a[1])
          .map(([wait, n]) => `${wait} ${((n / samples) * 100).toFixed(0)}%`)
          .join(", ")}`,
      );
    } finally {
      await dropDatabase(cluster.url, url);
    }
  }
} finally {
  await cluster.stop();
}
process.exit(0);
