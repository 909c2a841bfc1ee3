// `npm run bench -- --only tenantsWalk [--quick] [--tenants 10,1000,100000] [--claims n] [--rounds n] [--ping-rate n]`:
// issue 47 finding 1 — the cost of a claim of a subscription with `tenant` at many tenants whose
// keys only wait (a delay of an hour: corq.tenants.due_at in an hour, never walked by the fair
// pick, src/sql/consume/fairPick.ts) against its cost at 10. Each size on a database of its own:
// N tenants of one key each, its one event delayed (appended 1,000 events per append, 4
// producers, advanced until caught up), then 8 tenants × 50 keys ready. Then `consume("fair")`
// (claim + handler + ack) on every size in turn — interleaved, so the machine's other load falls
// on every size alike — while each size's other subscription ("other", no tenant) takes
// single-event appends at `--ping-rate`/s and drains them: their append→handler latency. The
// claim statement's server-side time from pg_stat_statements where the server has it loaded
// (run.ts starts the embedded one so), else "–".
import { commit } from "./commit.js";
import { loadavg } from "node:os";
import type pg from "pg";
import { createCorq, type Corq, type DeliveredEvent, type SubscriptionDefinition } from "../src/index.js";
import { benchClient } from "./database.js";
import { percentile } from "./stats.js";
import { chunks, sleep, Wakeup } from "./workload.js";
import { present } from "../test/helpers/present.js";

export interface TenantsWalkOptions {
  /** Tenants with ready keys, and the keys of each (one event each). */
  readyTenants: number;
  readyKeysPerTenant: number;
  /** Measured `consume("fair")` calls per size, after `warmupClaims` not measured. */
  claims: number;
  warmupClaims: number;
  /** Each size's other subscription: single-event appends per second while the claims run. */
  pingRate: number;
}

/** The claim statement's figures from pg_stat_statements (its statements with the fair walk). */
export interface ServerSide {
  calls: number;
  meanMs: number;
  minMs: number;
  maxMs: number;
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
  /** Autovacuum and autoanalyze runs on corq.keys and corq.tenants from the end of the load to the end of the claims. */
  autovacuums: number;
  autoanalyzes: number;
}

const DELAY_MS = 3_600_000;

/**
 * One size on its own database: N tenants whose one key waits, the ready tenants, a fair
 * consumer (one connection: its statements timed) and the other subscription's producer,
 * advancer and consumer.
 */
class World {
  // the claim statement: when the fair consumer's last statement was sent, and what it was
  private sentAt = 0;
  private sentText = "";
  private measuring = false;
  private notFairClaim = 0;
  private early = 0;
  private readonly claimMs: number[] = [];
  private readonly consumeMs: number[] = [];
  private empty = 0;
  private readonly other: number[] = [];
  private pinged = 0;
  private setup = { appendMs: 0, advanceMs: 0, rows: 0, due: 0, autovacuums: 0, autoanalyzes: 0 };
  private readonly producer: Corq;
  private readonly consumer: Corq;
  private readonly otherConsumer: Corq;

  private constructor(
    readonly databaseUrl: string,
    readonly tenants: number,
    private readonly admin: pg.Client,
  ) {
    const fair: SubscriptionDefinition = {
      name: "fair",
      events: ["Wait", "Work"],
      key: "data.k",
      tenant: "data.t",
      handle: (events: DeliveredEvent[]) => {
        const now = performance.now();
        if (this.measuring) {
          if (this.sentText.includes("fair_walk")) this.claimMs.push(now - this.sentAt);
          else this.notFairClaim++;
        }
        for (const e of events) if (e.name === "Wait") this.early++;
      },
    };
    const plain: SubscriptionDefinition = {
      name: "other",
      events: ["Ping"],
      handle: (events: DeliveredEvent[]) => {
        const now = Date.now();
        for (const e of events) this.other.push(now - (e.data as { t0: number }).t0);
      },
    };
    const subscriptions = [fair, plain];
    this.producer = createCorq({ databaseUrl, subscriptions, poolSize: 4 });
    this.consumer = createCorq({
      databaseUrl,
      subscriptions,
      poolSize: 1,
      onStatement: (text) => {
        this.sentAt = performance.now();
        this.sentText = text;
      },
    });
    this.otherConsumer = createCorq({ databaseUrl, subscriptions, poolSize: 1 });
  }

  static async open(databaseUrl: string, tenants: number): Promise<World> {
    return new World(databaseUrl, tenants, await benchClient(databaseUrl));
  }

  /** The waiting tenants (4 producers, 1,000 events per append), the ready ones, advanced; vacuumed and analyzed; the warm-up claims. */
  async load(o: TenantsWalkOptions) {
    const { producer } = this;
    await producer.migrate();
    const appendStarted = performance.now();
    const batches = chunks(
      Array.from({ length: this.tenants }, (_, i) => i),
      1000,
    );
    await Promise.all(
      Array.from({ length: 4 }, async (_, p) => {
        for (let b = p; b < batches.length; b += 4)
          await producer.append(
            `waiting-${b}`,
            (batches[b] ?? []).map((i) => ({ name: "Wait", data: { k: `w${i}`, t: `w${i}` }, delayMs: DELAY_MS })),
          );
      }),
    );
    this.setup.appendMs = performance.now() - appendStarted;
    const advanceStarted = performance.now();
    const caughtUp = async () => {
      while (present((await producer.advance()).fair, "the fair subscription's advance count") > 0);
    };
    await caughtUp();
    this.setup.advanceMs = performance.now() - advanceStarted;
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
    await this.admin.query("VACUUM (ANALYZE) corq.events, corq.queue, corq.keys, corq.tenants");
    const turns = await this.admin.query<{ rows: number; due: number }>(
      "SELECT count(*)::int AS rows, count(*) FILTER (WHERE due_at <= now())::int AS due FROM corq.tenants",
    );
    this.setup.rows = turns.rows[0]?.rows ?? 0;
    this.setup.due = turns.rows[0]?.due ?? 0;
    // warm-up: the consumer's connection, its plans
    for (let i = 0; i < o.warmupClaims; i++) await this.consumer.consume("fair");
    Object.assign(this.setup, await this.autovacuumRuns());
  }

  /** Autovacuum and autoanalyze runs so far on the tables the claims write (the statistics collector's counts). */
  private async autovacuumRuns() {
    const { rows } = await this.admin.query<{ autovacuums: number; autoanalyzes: number }>(
      `SELECT coalesce(sum(autovacuum_count), 0)::int AS autovacuums, coalesce(sum(autoanalyze_count), 0)::int AS autoanalyzes
       FROM pg_stat_user_tables WHERE schemaname = 'corq' AND relname IN ('keys', 'tenants')`,
    );
    return { autovacuums: rows[0]?.autovacuums ?? 0, autoanalyzes: rows[0]?.autoanalyzes ?? 0 };
  }

  /** pg_stat_statements here, if the server has it loaded. */
  async statementStats(): Promise<boolean> {
    try {
      await this.admin.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
      await this.admin.query("SELECT count(*) FROM pg_stat_statements");
      return true;
    } catch {
      return false; // not in shared_preload_libraries: client-side figures only
    }
  }

  resetStatements() {
    return this.admin.query("SELECT pg_stat_statements_reset()");
  }

  /** The other subscription while `running()`: an advancer, a drain loop and pings at `rate`/s. */
  otherTraffic(rate: number, running: () => boolean): Promise<unknown> {
    const { producer, otherConsumer } = this;
    const appended = new Wakeup();
    const enqueued = new Wakeup();
    let pinging = true;
    const pings: Promise<unknown>[] = [];
    const pinger = (async () => {
      const begun = Date.now();
      for (let i = 0; running(); i++) {
        const wait = begun + (i * 1000) / rate - Date.now();
        if (wait > 0) await sleep(wait);
        if (!running()) break;
        const t0 = Date.now();
        pings.push(
          producer.append(`other-${i % 10}`, [{ name: "Ping", data: { i, t0 } }]).then(() => appended.notify()),
        );
      }
      await Promise.all(pings);
      this.pinged = pings.length;
      // the last pings: handled (or 10 s)
      for (const until = Date.now() + 10_000; this.other.length < this.pinged && Date.now() < until; ) await sleep(5);
      pinging = false;
      appended.notify();
      enqueued.notify();
    })();
    return Promise.all([
      pinger,
      (async () => {
        while (pinging) {
          const n = await producer.advance();
          if ((n.other ?? 0) > 0) enqueued.notify();
          else await appended.wait(50);
        }
      })(),
      (async () => {
        while (pinging)
          if ((await otherConsumer.drain("other", { budgetMs: 1000 })).batches === 0) await enqueued.wait(50);
      })(),
    ]);
  }

  /** One measured `consume("fair")`. */
  async claim() {
    this.measuring = true;
    const t0 = performance.now();
    const result = await this.consumer.consume("fair");
    this.consumeMs.push(performance.now() - t0);
    this.measuring = false;
    if (result === null) this.empty++;
  }

  async result(serverSide: boolean): Promise<TenantsWalkRun> {
    if (this.notFairClaim > 0) throw new Error(`${this.notFairClaim} handler calls not after a fair claim statement`);
    let server: ServerSide | null = null;
    if (serverSide) {
      const { rows } = await this.admin.query<{
        calls: number;
        total: number;
        min: number;
        max: number;
        blocks: number;
      }>(`
        SELECT sum(calls)::float8 AS calls, sum(total_exec_time)::float8 AS total, max(max_exec_time)::float8 AS max,
          min(min_exec_time)::float8 AS min,
          sum(shared_blks_hit + shared_blks_read)::float8 AS blocks
        FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query LIKE '%fair_walk%'`);
      const row = rows[0];
      if (row && row.calls > 0)
        server = {
          calls: row.calls,
          meanMs: row.total / row.calls,
          minMs: row.min,
          maxMs: row.max,
          blocksPerCall: row.blocks / row.calls,
        };
    }
    const autovacuum = await this.autovacuumRuns();
    return {
      tenants: this.tenants,
      tenantRows: this.setup.rows,
      tenantsDue: this.setup.due,
      appendMs: this.setup.appendMs,
      advanceMs: this.setup.advanceMs,
      consumeP50Ms: percentile(this.consumeMs, 50),
      consumeP99Ms: percentile(this.consumeMs, 99),
      claimP50Ms: percentile(this.claimMs, 50),
      claimP99Ms: percentile(this.claimMs, 99),
      server,
      empty: this.empty,
      early: this.early,
      otherP50Ms: percentile(this.other, 50),
      otherP99Ms: percentile(this.other, 99),
      otherMaxMs: this.other.length > 0 ? Math.max(...this.other) : Number.NaN,
      otherSamples: this.other.length,
      autovacuums: autovacuum.autovacuums - this.setup.autovacuums,
      autoanalyzes: autovacuum.autoanalyzes - this.setup.autoanalyzes,
    };
  }

  async close() {
    await this.admin.end();
    await Promise.all([this.producer, this.consumer, this.otherConsumer].map((c) => c.close()));
  }
}

/**
 * Every size at once, each on its own database (`urls`, one per size): loaded one after another,
 * then the claims interleaved — claim i of every size, in an order turned by one each time — while
 * each size's other subscription takes its pings. So a burst of load on the machine falls on
 * every size alike, and the ratios between sizes are within one stretch of time.
 */
export async function tenantsWalkRound(
  urls: string[],
  sizes: number[],
  o: TenantsWalkOptions,
): Promise<{ runs: TenantsWalkRun[]; loadStart: number; loadEnd: number }> {
  const worlds: World[] = [];
  try {
    for (const [i, tenants] of sizes.entries()) worlds.push(await World.open(present(urls[i], "a url"), tenants));
    for (const world of worlds) await world.load(o);
    const serverSide = (await Promise.all(worlds.map((w) => w.statementStats()))).every(Boolean);
    if (serverSide) await present(worlds[0], "a world").resetStatements(); // every database's
    const loadStart = load();
    let claiming = true;
    const traffic = Promise.all(worlds.map((w) => w.otherTraffic(o.pingRate, () => claiming)));
    for (let i = 0; i < o.claims; i++)
      for (let j = 0; j < worlds.length; j++) await present(worlds[(i + j) % worlds.length], "a world").claim();
    claiming = false;
    await traffic;
    const loadEnd = load();
    return { runs: await Promise.all(worlds.map((w) => w.result(serverSide))), loadStart, loadEnd };
  } finally {
    await Promise.all(worlds.map((w) => w.close()));
  }
}

const load = () => present(loadavg()[0], "the 1-minute load average");

const fmt = (n: number) => (Number.isNaN(n) ? "–" : Math.round(n).toLocaleString("en"));
const ms = (n: number) => (Number.isNaN(n) ? "–" : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : fmt(n));

/** `--name a,b,c`: positive integers, or `fallback`. */
function listFlag(name: string, fallback: number[]): number[] {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const values = (process.argv[at + 1] ?? "").split(",").map(Number);
  if (values.length === 0 || values.some((v) => !Number.isInteger(v) || v <= 0))
    throw new Error(`--${name}: positive integers, comma-separated`);
  return values;
}

/** The section of bench/run.ts: every size in each round, interleaved; each size's ratios to the smallest within the round, and their medians. */
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
  const rounds = present(listFlag("rounds", [quick ? 1 : 3])[0], "rounds");
  const [pingRate] = listFlag("ping-rate", [50]);
  const base: TenantsWalkOptions = {
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
    `On ${commit()}, ${server}. Each size N on a database of its own: a subscription "fair" (\`key: "data.k", tenant: "data.t"\`, no caps) and a plain one, "other"; N tenants whose one key waits (one event each with \`delayMs\` an hour: appended 1,000 events per append by 4 producers, then advanced until caught up — through the library, no bulk SQL), then ${base.readyTenants} tenants × ${base.readyKeysPerTenant} keys ready (one event each); the tables vacuumed and analyzed; ${base.warmupClaims} \`consume("fair")\` calls of warm-up. ` +
      `Then ${fmt(base.claims)} \`consume("fair")\` calls on each size's database, **interleaved** (one call on each size in turn, the order turned by one each time; one connection per size, a no-op handler), so a burst of the machine's other load falls on every size alike: \`consume\` = the call (claim + handler + ack); \`claim\` = the claim statement, client-side (sent → its handler called); \`server\` = the claim statement's execution time in pg_stat_statements (mean / min / max over the ${fmt(base.claims)} calls) and the shared buffers it touched per call. ` +
      `Meanwhile each size's "other" takes ${base.pingRate} single-event appends/s (10 streams), advanced and drained in the same process (one advancer, one drain loop per size): their append→handler latency. ` +
      "`due`: tenants whose turn had come when the claims began (of the tenants' rows). `autovacuum / autoanalyze runs`: on corq.keys and corq.tenants while the claims ran (pg_stat_user_tables). `÷ N=10`: the size's consume p50 / claim p50 / server mean ÷ the smallest size's in the same round. `load`: the 1-minute load average at the claims' start → end (2 cores, shared).\n",
  );
  say(
    `| round | N tenants waiting | due / rows | append + advance s | consume p50 / p99 ms | claim p50 / p99 ms | server mean / min / max ms | buffers per claim | ÷ N=${fmt(present(sizes[0], "a size"))}: consume / claim / server | other p50 / p99 / max ms (samples) | autovacuum / autoanalyze runs | load |\n|---|---|---|---|---|---|---|---|---|---|---|---|`,
  );
  const withDatabases = <T>(n: number, fn: (urls: string[]) => Promise<T>, urls: string[] = []): Promise<T> =>
    urls.length === n ? fn(urls) : onFreshDatabase("walk", (url) => withDatabases(n, fn, [...urls, url]));
  const x = (v: number) => (Number.isNaN(v) ? "–" : `${v.toFixed(2)}×`);
  const ratios = new Map<
    number,
    { consume: number[]; claim: number[]; server: number[]; serverMin: number[]; buffers: number[]; other: number[] }
  >(sizes.map((n) => [n, { consume: [], claim: [], server: [], serverMin: [], buffers: [], other: [] }]));
  const all: TenantsWalkRun[] = [];
  for (let round = 1; round <= rounds; round++) {
    const { runs, loadStart, loadEnd } = await withDatabases(sizes.length, (urls) =>
      tenantsWalkRound(urls, sizes, base),
    );
    const first = present(runs[0], "the smallest size's run");
    for (const r of runs) {
      all.push(r);
      if (r.empty > 0 || r.early > 0) console.error(`N=${r.tenants}: ${r.empty} empty claims, ${r.early} early events`);
      const to = present(ratios.get(r.tenants), "the size's ratios");
      to.consume.push(r.consumeP50Ms / first.consumeP50Ms);
      to.claim.push(r.claimP50Ms / first.claimP50Ms);
      to.server.push((r.server?.meanMs ?? Number.NaN) / (first.server?.meanMs ?? Number.NaN));
      to.serverMin.push((r.server?.minMs ?? Number.NaN) / (first.server?.minMs ?? Number.NaN));
      to.buffers.push((r.server?.blocksPerCall ?? Number.NaN) / (first.server?.blocksPerCall ?? Number.NaN));
      to.other.push(r.otherP50Ms / first.otherP50Ms);
      say(
        `| ${round} | ${fmt(r.tenants)} | ${fmt(r.tenantsDue)} / ${fmt(r.tenantRows)} | ${(r.appendMs / 1000).toFixed(1)} + ${(r.advanceMs / 1000).toFixed(1)} | ${ms(r.consumeP50Ms)} / ${ms(r.consumeP99Ms)} | ${ms(r.claimP50Ms)} / ${ms(r.claimP99Ms)} | ${r.server ? `${ms(r.server.meanMs)} / ${ms(r.server.minMs)} / ${ms(r.server.maxMs)}` : "–"} | ${r.server ? r.server.blocksPerCall.toFixed(1) : "–"} | ${r === first ? "–" : `${x(to.consume.at(-1) ?? Number.NaN)} / ${x(to.claim.at(-1) ?? Number.NaN)} / ${x(to.server.at(-1) ?? Number.NaN)}`} | ${ms(r.otherP50Ms)} / ${ms(r.otherP99Ms)} / ${ms(r.otherMaxMs)} (${r.otherSamples}) | ${r.autovacuums} / ${r.autoanalyzes} | ${loadStart.toFixed(1)} → ${loadEnd.toFixed(1)} |`,
      );
    }
  }
  // the median over the rounds of each size's ratio within its round
  const mid = (values: number[]) => percentile(values, 50);
  const smallest = present(sizes[0], "a size");
  say("");
  const json: Record<string, unknown> = {};
  for (const n of sizes.slice(1)) {
    const r = present(ratios.get(n), "the size's ratios");
    say(
      `claim(${fmt(n)}) / claim(${fmt(smallest)}), ${rounds === 1 ? "one round" : `medians of the ${rounds} rounds' ratios`}: consume p50 **${x(mid(r.consume))}**, claim statement p50 **${x(mid(r.claim))}**, server mean **${x(mid(r.server))}** (per round: ${r.server.map(x).join(", ")}), server min ${x(mid(r.serverMin))}, buffers per claim ${x(mid(r.buffers))}; other's append→handler p50 ${x(mid(r.other))}. Target (issue 47): within 2×.`,
    );
    json[`tenants_${n}`] = {
      consume_p50_ratio: Number(mid(r.consume).toFixed(2)),
      claim_p50_ratio: Number(mid(r.claim).toFixed(2)),
      server_mean_ratio: Number(mid(r.server).toFixed(2)),
      server_min_ratio: Number(mid(r.serverMin).toFixed(2)),
      buffers_ratio: Number(mid(r.buffers).toFixed(2)),
      other_p50_ratio: Number(mid(r.other).toFixed(2)),
    };
  }
  const empty = all.reduce((s, r) => s + r.empty, 0);
  const early = all.reduce((s, r) => s + r.early, 0);
  say(`Every run: ${empty} consume calls that claimed nothing, ${early} waiting events delivered before their time.`);
  return { tenants_walk: json };
}
