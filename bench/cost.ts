// What a million ordered events cost on Workers + Neon (issue 34): a fixed workload through the
// local Workers stack (wrangler dev + workerd + the Neon driver over the local HTTP SQL endpoint +
// Postgres), its usage counted, then priced with bench/prices.ts.
//
//   workload  `events` single-event appends (or `eventsPerAppend` per request) over `keys`
//             streams, sent by `producers` concurrent producers, each key's events in order (or
//             in bursts: `burst` appends to as many keys at once, one burst every `burstGapMs`); one
//             code subscription (bench/costWorker.ts, a no-op handler) and one push subscription
//             (a receiver in this process) take every event; the cron fires every minute, as
//             deployed. Done when both subscriptions acked every event and nothing runs.
//   counted   Worker invocations by kind (bench/costWorker.ts counts them in the isolate);
//             workerd's CPU time (/proc: the whole runtime process, so an upper bound of the
//             CPU Cloudflare bills, which is the isolate's own); subrequests (HTTP SQL requests,
//             WebSocket sessions, push deliveries, SELF invocations); statements and their
//             execution time (pg_stat_statements, top level); the cluster's CPU time (/proc:
//             the postmaster's whole tree, backends and background workers, less this
//             process's own monitoring backend); WAL written; database growth.
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { startLocalStack } from "../cli/dev/localStack.js";
import { startEmbeddedPostgres, type RunningPostgres } from "../cli/dev/embeddedPostgres.js";
import { benchClient, dropDatabase, freshDatabase } from "./database.js";
import { descendantsCpuMs, ownCpuMs, parentOf, treeCpuMs } from "./processCpu.js";
import { startCountingReceiver } from "./systems/push.js";
import { OrderCheck, sleep } from "./workload.js";

export interface CostWorkload {
  events: number;
  keys: number;
  keysPerClaim: number;
  eventsPerAppend: number;
  producers: number;
  /** instead of steady producers: this many appends at once (each to another key), a burst every burstGapMs */
  burst?: { size: number; gapMs: number };
  /** give up after this long (the row says so) */
  maxMinutes: number;
}

export interface CostRun {
  workload: CostWorkload;
  complete: boolean;
  seconds: number;
  appendSeconds: number;
  load: { start: number; end: number };
  delivered: { code: number; push: number };
  violations: number;
  duplicates: number;
  invocations: Record<string, number>;
  workerdCpuMs: number;
  subrequests: { sqlHttp: number; wsSessions: number; pushDeliveries: number; self: number };
  statements: number;
  statementMs: number;
  /** the most expensive statements by total execution time */
  topStatements: { query: string; calls: number; ms: number }[];
  databaseCpuMs: number;
  walBytes: number;
  databaseGrowthBytes: number;
  logBytes: number;
}

// the monitor's statements run as this role, and pg_stat_statements' sums leave its statements out
const MONITOR_ROLE = "cost_monitor";
const WORKER = fileURLToPath(new URL("./costWorker.ts", import.meta.url));

/** The section's cluster: embedded Postgres with pg_stat_statements loaded. */
export async function startCostCluster(): Promise<RunningPostgres> {
  // another server (Debian's PostgreSQL 15, say): local, with pg_stat_statements preloaded —
  // CORQ_PG_SETTINGS="shared_preload_libraries=pg_stat_statements" infra/systemPostgres.sh start
  const url = process.env.DATABASE_URL;
  if (url) return { url, stop: async () => undefined, restart: () => Promise.reject(new Error("not ours to restart")) };
  return startEmbeddedPostgres({
    settings: { shared_preload_libraries: "pg_stat_statements", "pg_stat_statements.track": "top" },
  });
}

/** One configuration on a fresh database of `serverUrl`'s cluster, with its own local stack. */
export async function measureCost(
  serverUrl: string,
  w: CostWorkload,
  progress: (line: string) => void,
): Promise<CostRun> {
  const databaseUrl = await freshDatabase(serverUrl, "cost");
  const check = new OrderCheck();
  const receiver = await startCountingReceiver(check);
  const stack = await startLocalStack({
    databaseUrl,
    entrypoint: WORKER,
    cronIntervalMs: 60_000,
    vars: { CORQ_KEYS_PER_CLAIM: String(w.keysPerClaim) },
  });
  const monitor = await benchClient(databaseUrl);
  try {
    const headers = { authorization: `Bearer ${stack.adminToken}`, "content-type": "application/json" };
    const api = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${stack.url}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
      return response.json();
    };
    await api("PUT", "/subscriptions/cost-push", {
      events: ["Costed"],
      deliver: { url: receiver.url, timeoutMs: 10_000 },
    });
    await monitor.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
    await monitor.query(`DO $$ BEGIN
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${MONITOR_ROLE}') THEN CREATE ROLE ${MONITOR_ROLE}; END IF;
      END $$`);
    await monitor.query(`GRANT pg_read_all_data, pg_read_all_stats TO ${MONITOR_ROLE}`);
    const [{ pid: monitorPid }] = (await monitor.query("SELECT pg_backend_pid() AS pid")).rows;
    const postmaster = parentOf(monitorPid);

    const snapshot = async () => {
      const { rows } = await monitor.query(
        `SELECT pg_current_wal_lsn()::text AS lsn, pg_database_size(current_database())::float8 AS size`,
      );
      return {
        invocations: (await (await fetch(`${stack.url}/__bench/invocations`)).json()) as Record<string, number>,
        workerdMs: descendantsCpuMs("workerd"),
        clusterMs: treeCpuMs(postmaster) - ownCpuMs(monitorPid),
        sqlHttp: stack.httpStatements(),
        wsSessions: stack.wsSessions(),
        pushDeliveries: receiver.requests(),
        lsn: rows[0].lsn as string,
        size: rows[0].size as number,
      };
    };
    const before = await snapshot();
    await monitor.query("SELECT pg_stat_statements_reset()");
    // pg_stat_statements records the current role: from here on the monitor's statements are its own
    await monitor.query(`SET ROLE ${MONITOR_ROLE}`);
    const others = `dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND userid <> '${MONITOR_ROLE}'::regrole`;
    const loadStart = loadavg()[0] ?? 0;
    const started = performance.now();

    const send = async (request: { key: string; seqs: number[] }) => {
      const response = await fetch(`${stack.url}/streams/cost-${request.key}/events`, {
        method: "POST",
        headers,
        body: JSON.stringify({
          events: request.seqs.map((seq) => ({ name: "Costed", data: { key: request.key, seq } })),
        }),
      });
      await response.arrayBuffer();
      if (response.status !== 201) throw new Error(`append: ${response.status}`);
    };
    const appendDone = (async () => {
      if (w.burst) {
        // one producer's requests in order (event i to key i % keys): a burst's appends go to
        // different keys, and each burst is answered before the next starts, so each key's order holds
        const { size, gapMs } = w.burst;
        const requests = producerRequests(0, { ...w, producers: 1 });
        for (let i = 0; i < requests.length; i += size) {
          await Promise.all(requests.slice(i, i + size).map(send));
          await sleep(Math.max(0, started + ((i + size) / size) * gapMs - performance.now()));
        }
      } else {
        // producers: key k belongs to producer k % producers; each sends its keys' events in order
        await Promise.all(
          Array.from({ length: w.producers }, async (_, p) => {
            for (const request of producerRequests(p, w)) await send(request);
          }),
        );
      }
      return (performance.now() - started) / 1000;
    })();

    // done: both subscriptions acked every event, the receiver saw them all, and nothing runs
    const deadline = Date.now() + w.maxMinutes * 60_000;
    let appendSeconds = Number.NaN;
    appendDone.then((s) => (appendSeconds = s)).catch(() => undefined);
    let acked = { code: 0, push: 0 };
    let lastLog = 0;
    while (Date.now() < deadline) {
      const { rows } = await monitor.query(
        `SELECT s.name, coalesce(sum(k.acked), 0)::float8 AS acked
         FROM corq.subscriptions s LEFT JOIN corq.keys k ON k.subscription_id = s.id
         WHERE s.name IN ('cost-code', 'cost-push') GROUP BY s.name`,
      );
      const of = (name: string) => Number(rows.find((r) => r.name === name)?.acked ?? 0);
      acked = { code: of("cost-code"), push: of("cost-push") };
      if (Date.now() - lastLog > 15_000) {
        lastLog = Date.now();
        progress(
          `cost kpc ${w.keysPerClaim}: ${Math.round((performance.now() - started) / 1000)} s, acked code ${acked.code} push ${acked.push} of ${w.events}, load ${loadavg()[0]?.toFixed(1)}`,
        );
      }
      if (acked.code >= w.events && acked.push >= w.events && check.handled >= w.events) break;
      // the sum reads every key row (tens of ms at 20,000): its CPU is subtracted, but it loads the machine
      await sleep(3000);
    }
    await appendDone;
    const complete = acked.code >= w.events && acked.push >= w.events && check.handled >= w.events;
    const seconds = (performance.now() - started) / 1000;
    // the consumers' last looks and slot releases: wait until the invocation counts stop moving
    for (let last = ""; ; ) {
      await sleep(2000);
      const now = JSON.stringify(await (await fetch(`${stack.url}/__bench/invocations`)).json());
      const { rows } = await monitor.query(
        `SELECT count(*)::int AS busy FROM corq.consumer_slots WHERE busy_until > now()`,
      );
      if (now === last && rows[0].busy === 0) break;
      last = now;
    }
    const after = await snapshot();
    const loadEnd = loadavg()[0] ?? 0;

    const { rows: sums } = await monitor.query(
      `SELECT coalesce(sum(calls), 0)::float8 AS calls, coalesce(sum(total_exec_time), 0)::float8 AS ms
       FROM pg_stat_statements WHERE ${others}`,
    );
    const { rows: top } = await monitor.query(
      `SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query, calls::float8 AS calls, total_exec_time::float8 AS ms
       FROM pg_stat_statements WHERE ${others} ORDER BY total_exec_time DESC LIMIT 5`,
    );
    const { rows: sizes } = await monitor.query(
      `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8 AS wal, pg_total_relation_size('corq.events')::float8 AS log`,
      [after.lsn, before.lsn],
    );
    const invocations: Record<string, number> = {};
    for (const kind of new Set([...Object.keys(before.invocations), ...Object.keys(after.invocations)]))
      invocations[kind] = (after.invocations[kind] ?? 0) - (before.invocations[kind] ?? 0);
    const self = (invocations.consumer ?? 0) + (invocations.horizonRetry ?? 0) + (invocations.retention ?? 0);
    return {
      workload: w,
      complete,
      seconds,
      appendSeconds,
      load: { start: loadStart, end: loadEnd },
      delivered: { code: acked.code, push: check.handled },
      violations: check.violations,
      duplicates: check.duplicates,
      invocations,
      workerdCpuMs: after.workerdMs - before.workerdMs,
      subrequests: {
        sqlHttp: after.sqlHttp - before.sqlHttp,
        wsSessions: after.wsSessions - before.wsSessions,
        pushDeliveries: after.pushDeliveries - before.pushDeliveries,
        self,
      },
      statements: sums[0].calls,
      statementMs: sums[0].ms,
      topStatements: top.map((r) => ({ query: r.query, calls: r.calls, ms: r.ms })),
      databaseCpuMs: after.clusterMs - before.clusterMs,
      walBytes: sizes[0].wal,
      databaseGrowthBytes: after.size - before.size,
      logBytes: sizes[0].log,
    };
  } finally {
    await monitor.end();
    await stack.stop();
    await receiver.close();
    await dropDatabase(serverUrl, databaseUrl);
  }
}

/**
 * Producer `p`'s append requests, in order: its keys' events (event i goes to key i % keys, as
 * its ⌊i / keys⌋-th), `eventsPerAppend` of one key per request, the keys taking turns.
 */
export function producerRequests(
  p: number,
  w: Pick<CostWorkload, "events" | "keys" | "producers" | "eventsPerAppend">,
) {
  const perKey = Math.ceil(w.events / w.keys);
  const requests: { key: string; seqs: number[] }[] = [];
  for (let first = 0; first < perKey; first += w.eventsPerAppend) {
    for (let k = p; k < w.keys; k += w.producers) {
      const seqs: number[] = [];
      for (let seq = first; seq < Math.min(first + w.eventsPerAppend, perKey); seq++)
        if (seq * w.keys + k < w.events) seqs.push(seq);
      if (seqs.length > 0) requests.push({ key: `k${k}`, seqs });
    }
  }
  return requests;
}

/** Usage per event and its price per million events (bench/prices.ts). */
export function costPerMillion(run: CostRun, p: typeof import("./prices.js")) {
  const { prices, HISTORY_DAYS } = p;
  const events = run.workload.events;
  const perMillion = (n: number) => (n / events) * 1_000_000;
  const all = Object.values(run.invocations).reduce((sum, n) => sum + n, 0);
  // inbound requests: what comes through the front door (appends, and the bench's own calls there: none
  // in the window) and the cron's triggers; SELF invocations are not billed as requests (bench/prices.ts)
  const billedRequests = (run.invocations.append ?? 0) + (run.invocations.cron ?? 0) + (run.invocations.other ?? 0);
  const subrequests =
    run.subrequests.sqlHttp + run.subrequests.wsSessions + run.subrequests.pushDeliveries + run.subrequests.self;
  const gb = 1e9;
  const dollars = {
    workersRequests: (perMillion(billedRequests) / 1e6) * prices.workersRequests.usd,
    workersCpu: (perMillion(run.workerdCpuMs) / 1e6) * prices.workersCpu.usd,
    // an autoscaled compute busy exactly for the CPU the cluster used: 1 CU-second per CPU-second
    neonCompute: (perMillion(run.databaseCpuMs) / 1000 / 3600) * prices.neonComputeLaunch.usd,
    neonComputeScale: (perMillion(run.databaseCpuMs) / 1000 / 3600) * prices.neonComputeScale.usd,
    // what stays: the log (the events table with its indexes); the queue empties, idle key rows are compacted
    storagePerMonth: (perMillion(run.logBytes) / gb) * prices.neonStorage.usd,
    history: (perMillion(run.walBytes) / gb) * prices.neonHistory.usd * (HISTORY_DAYS / 30),
  };
  const total =
    dollars.workersRequests + dollars.workersCpu + dollars.neonCompute + dollars.storagePerMonth + dollars.history;
  const parts: [string, number][] = [
    ["Workers requests", dollars.workersRequests],
    ["Workers CPU", dollars.workersCpu],
    ["Neon compute", dollars.neonCompute],
    ["Neon storage (a month)", dollars.storagePerMonth],
    ["Neon history", dollars.history],
  ];
  const [dominant] = [...parts].sort((a, b) => b[1] - a[1]);
  return {
    total,
    dollars,
    dominant: dominant ? `${dominant[0]} (${Math.round((dominant[1] / total) * 100)}%)` : "",
    perEvent: {
      invocations: all / events,
      billedRequests: billedRequests / events,
      byKind: Object.fromEntries(Object.entries(run.invocations).map(([kind, n]) => [kind, n / events])),
      cpuMs: run.workerdCpuMs / events,
      subrequests: subrequests / events,
      statements: run.statements / events,
      statementMs: run.statementMs / events,
      databaseCpuMs: run.databaseCpuMs / events,
      walBytes: run.walBytes / events,
      growthBytes: run.databaseGrowthBytes / events,
      logBytes: run.logBytes / events,
    },
    perInvocation: { cpuMs: run.workerdCpuMs / all, subrequests: subrequests / all },
  };
}
