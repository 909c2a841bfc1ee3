// `npm run bench -- --only tenantsWalk [--quick] [--tenants 10,1000,100000] [--claims n] [--rounds n]`:
// issue 47 finding 1 — the cost of a claim of a subscription with `tenant` at many tenants whose
// keys only wait (a delay of an hour: corq.tenants.due_at in an hour, never walked by the fair
// pick, src/sql/consume/fairPick.ts) against its cost at 10. Per size, on a fresh database:
// N tenants of one key each, its one event delayed (appended 1,000 events per append, 4
// producers, advanced until caught up), then 8 tenants × 50 keys ready; then one consumer's
// `consume("fair")` one after another (claim + handler + ack), while another subscription
// ("other", no tenant) takes single-event appends at `--ping-rate`/s and drains them: their
// append→handler latency. The claim statement's server-side time from pg_stat_statements
// where the server has it loaded (run.ts starts the embedded one so), else "–".
import { execSync } from "node:child_process";
import { loadavg } from "node:os";
import { createCorq, type Corq, type DeliveredEvent, type SubscriptionDefinition } from "../src/index.js";
import { benchClient } from "./database.js";
import { percentile } from "./stats.js";
import { chunks, sleep, Wakeup } from "./workload.js";
import { present } from "../test/helpers/present.js";

export interface TenantsWalkOptions {
  /** Tenants whose one key waits (its one event delayed an hour). */
  tenants: number;
  /** Tenants with ready keys, and the keys of each (one event each). */
  readyTenants: number;
  readyKeysPerTenant: number;
  /** Measured `consume("fair")` calls, after `warmupClaims` not measured. */
  claims: number;
  warmupClaims: number;
  /** The other subscription's single-event appends per second while the claims run. */
  pingRate: number;
}

/** The claim statement's figures from pg_stat_statements (its statements with the fair walk). */
export interface ServerSide {
  calls: number;
  meanMs: number;
  maxMs: number;
  stddevMs: number;
  /** Shared buffers hit + read per call. */
  blocksPerCall: number;
}

export interface TenantsWalkRun {
  tenants: number;
  /** corq.tenants rows, and those whose turn had come when the claims began. */
  tenantRows: number;
  tenantsDue: number;
  /** The waiting tenants' appends and their advance (ms). */
  appendMs: number;
  advanceMs: number;
  /** `consume("fair")`, the call: claim + handler + ack (ms). */
  consumeP50Ms: number;
  consumeP99Ms: number;
  /** The claim statement, client-side: sent → its handler called (ms). */
  claimP50Ms: number;
  claimP99Ms: number;
  server: ServerSide | null;
  /** consume calls that claimed nothing, and events handled of a waiting tenant (both 0). */
  empty: number;
  early: number;
  /** The other subscription's append→handler latency while the claims ran (ms). */
  otherP50Ms: number;
  otherP99Ms: number;
  otherMaxMs: number;
  otherSamples: number;
  loadStart: number;
  loadEnd: number;
}

const load = () => present(loadavg()[0], "the 1-minute load average");
const DELAY_MS = 3_600_000;

export async function tenantsWalkRun(databaseUrl: string, o: TenantsWalkOptions): Promise<TenantsWalkRun> {
  const loadStart = load();
  // the claim statement: when the fair consumer's last statement was sent, and what it was
  let sentAt = 0;
  let sentText = "";
  const claimMs: number[] = [];
  let measuring = false;
  let notFairClaim = 0;
  let early = 0;
  const other: number[] = [];
  const fair: SubscriptionDefinition = {
    name: "fair",
    events: ["Wait", "Work"],
    key: "data.k",
    tenant: "data.t",
    handle: (events: DeliveredEvent[]) => {
      const now = performance.now();
      if (measuring) {
        if (sentText.includes("fair_walk")) claimMs.push(now - sentAt);
        else notFairClaim++;
      }
      for (const e of events) if (e.name === "Wait") early++;
    },
  };
  const plain: SubscriptionDefinition = {
    name: "other",
    events: ["Ping"],
    handle: (events: DeliveredEvent[]) => {
      const now = Date.now();
      for (const e of events) other.push(now - (e.data as { t0: number }).t0);
    },
  };
  const subscriptions = [fair, plain];
  const producer = createCorq({ databaseUrl, subscriptions, poolSize: 4 });
  await producer.migrate();
  const consumer: Corq = createCorq({
    databaseUrl,
    subscriptions,
    poolSize: 1,
    onStatement: (text) => {
      sentAt = performance.now();
      sentText = text;
    },
  });
  const otherConsumer = createCorq({ databaseUrl, subscriptions, poolSize: 1 });
  const admin = await benchClient(databaseUrl);
  try {
    // the waiting tenants: one key each, its one event an hour away; 4 producers, 1,000 per append
    const appendStarted = performance.now();
    const waiting = Array.from({ length: o.tenants }, (_, i) => i);
    const batches = chunks(waiting, 1000);
    await Promise.all(
      Array.from({ length: 4 }, async (_, p) => {
        for (let b = p; b < batches.length; b += 4)
          await producer.append(
            `waiting-${b}`,
            (batches[b] ?? []).map((i) => ({ name: "Wait", data: { k: `w${i}`, t: `w${i}` }, delayMs: DELAY_MS })),
          );
      }),
    );
    const appendMs = performance.now() - appendStarted;
    const advanceStarted = performance.now();
    const caughtUp = async () => {
      while (present((await producer.advance()).fair, "the fair subscription's advance count") > 0);
    };
    await caughtUp();
    const advanceMs = performance.now() - advanceStarted;
    // the ready tenants: keys r0 … in tenant order round robin
    await producer.append(
      "ready",
      Array.from({ length: o.readyTenants * o.readyKeysPerTenant }, (_, i) => ({
        name: "Work",
        data: { k: `r${i}`, t: `r${i % o.readyTenants}` },
      })),
    );
    await caughtUp();
    // what autovacuum would do to the loaded tables next, done now (fixed statistics)
    await admin.query("VACUUM (ANALYZE) corq.events, corq.queue, corq.keys, corq.tenants");
    const turns = await admin.query<{ rows: number; due: number }>(
      "SELECT count(*)::int AS rows, count(*) FILTER (WHERE due_at <= now())::int AS due FROM corq.tenants",
    );

    // warm-up: the consumer's connection, its plans
    for (let i = 0; i < o.warmupClaims; i++) await consumer.consume("fair");
    let serverSide = false;
    try {
      await admin.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
      await admin.query("SELECT pg_stat_statements_reset()");
      serverSide = true;
    } catch {
      // not loaded on this server (shared_preload_libraries): client-side figures only
    }

    // the other subscription: an advancer and a drain loop, pings at its rate while the claims run
    let done = false;
    const appended = new Wakeup();
    const enqueued = new Wakeup();
    const loops = Promise.all([
      (async () => {
        while (!done) {
          const n = await producer.advance();
          if ((n.other ?? 0) > 0) enqueued.notify();
          else await appended.wait(50);
        }
      })(),
      (async () => {
        while (!done)
          if ((await otherConsumer.drain("other", { budgetMs: 1000 })).batches === 0) await enqueued.wait(50);
      })(),
    ]);
    const pings: Promise<unknown>[] = [];
    let claiming = true;
    const pinger = (async () => {
      const begun = Date.now();
      for (let i = 0; claiming; i++) {
        const wait = begun + (i * 1000) / o.pingRate - Date.now();
        if (wait > 0) await sleep(wait);
        if (!claiming) break;
        const t0 = Date.now();
        pings.push(
          producer.append(`other-${i % 10}`, [{ name: "Ping", data: { i, t0 } }]).then(() => appended.notify()),
        );
      }
    })();

    const consumeMs: number[] = [];
    let empty = 0;
    measuring = true;
    for (let i = 0; i < o.claims; i++) {
      const t0 = performance.now();
      const result = await consumer.consume("fair");
      consumeMs.push(performance.now() - t0);
      if (result === null) empty++;
    }
    measuring = false;
    claiming = false;
    await pinger;
    await Promise.all(pings);
    const pinged = pings.length;
    // the last pings: handled (or 10 s)
    for (const until = Date.now() + 10_000; other.length < pinged && Date.now() < until; ) await sleep(5);
    done = true;
    appended.notify();
    enqueued.notify();
    await loops;

    let server: ServerSide | null = null;
    if (serverSide) {
      const { rows } = await admin.query<{ calls: number; total: number; max: number; sumsq: number; blocks: number }>(`
        SELECT sum(calls)::float8 AS calls, sum(total_exec_time)::float8 AS total, max(max_exec_time)::float8 AS max,
          sum(calls * (stddev_exec_time ^ 2 + mean_exec_time ^ 2))::float8 AS sumsq,
          sum(shared_blks_hit + shared_blks_read)::float8 AS blocks
        FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query LIKE '%fair_walk%'`);
      const row = rows[0];
      if (row && row.calls > 0) {
        const mean = row.total / row.calls;
        server = {
          calls: row.calls,
          meanMs: mean,
          maxMs: row.max,
          stddevMs: Math.sqrt(Math.max(0, row.sumsq / row.calls - mean * mean)),
          blocksPerCall: row.blocks / row.calls,
        };
      }
    }
    if (notFairClaim > 0) throw new Error(`${notFairClaim} handler calls not after a fair claim statement`);
    return {
      tenants: o.tenants,
      tenantRows: turns.rows[0]?.rows ?? 0,
      tenantsDue: turns.rows[0]?.due ?? 0,
      appendMs,
      advanceMs,
      consumeP50Ms: percentile(consumeMs, 50),
      consumeP99Ms: percentile(consumeMs, 99),
      claimP50Ms: percentile(claimMs, 50),
      claimP99Ms: percentile(claimMs, 99),
      server,
      empty,
      early,
      otherP50Ms: percentile(other, 50),
      otherP99Ms: percentile(other, 99),
      otherMaxMs: other.length > 0 ? Math.max(...other) : Number.NaN,
      otherSamples: other.length,
      loadStart,
      loadEnd: load(),
    };
  } finally {
    await admin.end();
    await Promise.all([producer, consumer, otherConsumer].map((c) => c.close()));
  }
}

const fmt = (n: number) => (Number.isNaN(n) ? "–" : Math.round(n).toLocaleString("en"));
const ms = (n: number) => (Number.isNaN(n) ? "–" : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : fmt(n));

/** The commit the run is on, and whether tracked files of src/ or bench/ differ from it. */
function commit(): string {
  try {
    const hash = execSync("git rev-parse --short HEAD", { encoding: "utf8" }).trim();
    const dirty =
      execSync("git status --porcelain --untracked-files=no -- src bench", { encoding: "utf8" }).trim() !== "";
    return dirty ? `${hash} with uncommitted changes` : hash;
  } catch {
    return "an unknown commit";
  }
}

/** `--name a,b,c`: positive integers, or `fallback`. */
function listFlag(name: string, fallback: number[]): number[] {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const values = (process.argv[at + 1] ?? "").split(",").map(Number);
  if (values.length === 0 || values.some((v) => !Number.isInteger(v) || v <= 0))
    throw new Error(`--${name}: positive integers, comma-separated`);
  return values;
}

/** The section of bench/run.ts: every size in each round (the order reversed every other round), the ratios to the smallest. */
export async function tenantsWalkSection({
  quick,
  say,
  onFreshDatabase,
}: {
  quick: boolean;
  say: (line: string) => void;
  onFreshDatabase: <T>(label: string, fn: (url: string) => Promise<T>) => Promise<T>;
}) {
  const sizes = listFlag("tenants", quick ? [10, 10_000] : [10, 1_000, 100_000]);
  const [claims] = listFlag("claims", [200]);
  const [rounds] = listFlag("rounds", [quick ? 1 : 3]);
  const [pingRate] = listFlag("ping-rate", [100]);
  const base: Omit<TenantsWalkOptions, "tenants"> = {
    readyTenants: 8,
    readyKeysPerTenant: 50,
    claims: present(claims, "claims"),
    warmupClaims: 10,
    pingRate: present(pingRate, "the ping rate"),
  };
  // the server: its version and whether it compiles (JIT)
  const server = await onFreshDatabase("walkinfo", async (url) => {
    const client = await benchClient(url);
    try {
      const version = (await client.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]?.v;
      const jit = (
        await client.query<{ jit: string; available: boolean }>(
          "SELECT current_setting('jit') AS jit, pg_jit_available() AS available",
        )
      ).rows[0];
      const preload = (await client.query<{ p: string }>("SELECT current_setting('shared_preload_libraries') AS p"))
        .rows[0]?.p;
      return `PostgreSQL ${version}, jit ${jit?.jit}${jit?.available ? "" : " (no JIT provider: nothing compiled)"}${preload ? `, shared_preload_libraries=${preload}` : ""}`;
    } finally {
      await client.end();
    }
  });
  say(
    `On ${commit()}, ${server}. Per size, on a fresh database: a subscription "fair" (\`key: "data.k", tenant: "data.t"\`, no caps) and a plain one, "other"; N tenants whose one key waits (one event each with \`delayMs\` an hour: appended 1,000 events per append by 4 producers, then advanced until caught up — through the library, no bulk SQL), then ${base.readyTenants} tenants × ${base.readyKeysPerTenant} keys ready (one event each); the tables vacuumed and analyzed. ` +
      `Then one consumer calls \`consume("fair")\` ${base.warmupClaims} times (warm-up, not counted) and ${fmt(base.claims)} times one after another (one connection, a no-op handler): \`consume\` = the call (claim + handler + ack); \`claim\` = the claim statement, client-side (sent → its handler called); \`server\` = the claim statement's execution time in pg_stat_statements (mean / max over the ${fmt(base.claims)} calls) and the shared buffers it touched per call. ` +
      `Meanwhile "other" takes ${base.pingRate} single-event appends/s (10 streams), advanced and drained in the same process (one advancer, one drain loop): their append→handler latency. ` +
      `\`due\`: tenants whose turn had come when the claims began (of the tenants' rows). \`load\`: the 1-minute load average at the run's start → end (2 cores, shared). Rounds alternate the order of the sizes.\n`,
  );
  say(
    "| round | N tenants waiting | due / rows | append + advance s | consume p50 / p99 ms | claim p50 / p99 ms | server mean / max ms | buffers per claim | other p50 / p99 / max ms (samples) | load |\n|---|---|---|---|---|---|---|---|---|---|",
  );
  const runs = new Map<number, TenantsWalkRun[]>(sizes.map((n) => [n, []]));
  for (let round = 1; round <= present(rounds, "rounds"); round++) {
    for (const tenants of round % 2 === 1 ? sizes : [...sizes].reverse()) {
      const r = await onFreshDatabase("walk", (url) => tenantsWalkRun(url, { ...base, tenants }));
      runs.get(tenants)?.push(r);
      if (r.empty > 0 || r.early > 0) console.error(`N=${tenants}: ${r.empty} empty claims, ${r.early} early events`);
      say(
        `| ${round} | ${fmt(tenants)} | ${fmt(r.tenantsDue)} / ${fmt(r.tenantRows)} | ${(r.appendMs / 1000).toFixed(1)} + ${(r.advanceMs / 1000).toFixed(1)} | ${ms(r.consumeP50Ms)} / ${ms(r.consumeP99Ms)} | ${ms(r.claimP50Ms)} / ${ms(r.claimP99Ms)} | ${r.server ? `${ms(r.server.meanMs)} / ${ms(r.server.maxMs)}` : "–"} | ${r.server ? r.server.blocksPerCall.toFixed(1) : "–"} | ${ms(r.otherP50Ms)} / ${ms(r.otherP99Ms)} / ${ms(r.otherMaxMs)} (${r.otherSamples}) | ${r.loadStart.toFixed(1)} → ${r.loadEnd.toFixed(1)} |`,
      );
    }
  }
  // per size, the median over the rounds of each figure; ratios to the smallest size
  const mid = (n: number, f: (r: TenantsWalkRun) => number) => percentile((runs.get(n) ?? []).map(f), 50);
  const smallest = present(sizes[0], "a size");
  const figures = {
    consume: (r: TenantsWalkRun) => r.consumeP50Ms,
    consumeP99: (r: TenantsWalkRun) => r.consumeP99Ms,
    claim: (r: TenantsWalkRun) => r.claimP50Ms,
    claimP99: (r: TenantsWalkRun) => r.claimP99Ms,
    server: (r: TenantsWalkRun) => r.server?.meanMs ?? Number.NaN,
    buffers: (r: TenantsWalkRun) => r.server?.blocksPerCall ?? Number.NaN,
    other: (r: TenantsWalkRun) => r.otherP50Ms,
  };
  const ratio = (n: number, f: (r: TenantsWalkRun) => number) => mid(n, f) / mid(smallest, f);
  const x = (v: number) => (Number.isNaN(v) ? "–" : `${v.toFixed(2)}×`);
  say("");
  const json: Record<string, unknown> = {};
  for (const n of sizes.slice(1)) {
    say(
      `claim(${fmt(n)}) / claim(${fmt(smallest)}), medians over ${rounds} round${rounds === 1 ? "" : "s"}: consume p50 **${x(ratio(n, figures.consume))}** (p99 ${x(ratio(n, figures.consumeP99))}), claim statement p50 **${x(ratio(n, figures.claim))}** (p99 ${x(ratio(n, figures.claimP99))}), server mean **${x(ratio(n, figures.server))}**, buffers per claim ${x(ratio(n, figures.buffers))}; other's append→handler p50 ${x(ratio(n, figures.other))}. Target (issue 47): within 2×.`,
    );
    json[`tenants_${n}`] = {
      consume_p50_ratio: Number(ratio(n, figures.consume).toFixed(2)),
      claim_p50_ratio: Number(ratio(n, figures.claim).toFixed(2)),
      server_mean_ratio: Number(ratio(n, figures.server).toFixed(2)),
      other_p50_ratio: Number(ratio(n, figures.other).toFixed(2)),
    };
  }
  const empty = [...runs.values()].flat().reduce((s, r) => s + r.empty, 0);
  const early = [...runs.values()].flat().reduce((s, r) => s + r.early, 0);
  say(`Every run: ${empty} consume calls that claimed nothing, ${early} waiting events delivered before their time.`);
  return { tenants_walk: json };
}
