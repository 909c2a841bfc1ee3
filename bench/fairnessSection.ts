// `npm run bench -- --only fairness [--events n] [--keys n] [--quiet-events n] [--quiet-keys n]
// [--quiet-rate n] [--rounds n] [--throughput-pairs n]`: issue 32's fairness target, in one run so the
// ratios are within it — B's latency alone, behind A's backlog with and without `tenant`, and A's
// drain rate alone with and without it (bench/fairness.ts measures).
import { commit } from "./commit.js";
import { fairnessRun, type FairnessOptions, type FairnessRun } from "./fairness.js";
import { median } from "./stats.js";

const arg = (name: string, fallback: number) => {
  const at = process.argv.indexOf(`--${name}`);
  const value = at >= 0 ? Number(process.argv[at + 1]) : fallback;
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name}: a positive integer`);
  return value;
};

const fmt = (n: number) => (Number.isNaN(n) ? "–" : Math.round(n).toLocaleString("en"));
const ms = (n: number) => (Number.isNaN(n) ? "–" : n < 100 ? n.toFixed(1) : fmt(n));
const loads = (r: FairnessRun) => `${r.loadStart.toFixed(1)} → ${r.loadEnd.toFixed(1)}`;

export async function fairnessSection({
  quick,
  say,
  onFreshDatabase,
}: {
  quick: boolean;
  say: (line: string) => void;
  onFreshDatabase: <T>(label: string, fn: (url: string) => Promise<T>) => Promise<T>;
}) {
  const events = arg("events", quick ? 20_000 : 100_000);
  const base: Omit<FairnessOptions, "tenant"> = {
    events,
    keys: arg("keys", Math.max(1, Math.round(events / 10))),
    quietEvents: arg("quiet-events", 100),
    quietKeys: arg("quiet-keys", 10),
    quietRate: arg("quiet-rate", 50),
    consumers: 8,
    keysPerClaim: 16,
  };
  const rounds = arg("rounds", quick ? 1 : 2);
  const pairs = arg("throughput-pairs", quick ? 2 : 3);
  say(
    `On ${commit()}. Tenant A appends ${fmt(base.events)} events over ${fmt(base.keys)} keys (8 producers, 100 events per append), all advanced before anyone consumes; ` +
      `then ${base.consumers} consumers drain (8 concurrent drain loops, one connection each, keysPerClaim ${base.keysPerClaim} — the library's default — batch size 100, a no-op handler) ` +
      `and, once 5% of A is handled, tenant B appends ${base.quietEvents} single events over ${base.quietKeys} keys at ${base.quietRate}/s. ` +
      'Key = `data.key`; "tenant on" is `tenant: "data.tenant"`, "off" is today\'s claim (oldest keys first). ' +
      "B's latency = its handler's clock − the append call's start (the append included); split at the append call's return (after it: the advance that queues the event, then the claims — one in flight began before it was queued, the next takes it). " +
      "While B's events came: `advance calls`, the advancer's calls that queued something (3 statements: the subscriptions' sync, the advance, the re-check of kicks); `consumers' statements`, on one consumer the time from one statement to its next (each settles the finished batches and claims the next keys); " +
      "`event loop delay`, the bench process's own (the 8 consumers, the producer and the advancer share it). Each phase on a fresh database, " +
      "the loaded tables vacuumed and analyzed before the consumers start (what autovacuum would do next, at a fixed moment). " +
      "`load`: the 1-minute load average at the phase's start → end (2 cores, shared).\n",
  );
  say(
    "| round | phase | tenant | B p50 ms | B p99 ms | B max ms | B's append p50 ms | B after its append p50 ms | advance calls p50 ms | consumers' statements p50 / p99 ms | event loop delay p99 ms | A's events left when B's last was handled | A drain events/s | load |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  );
  const run = (label: string, o: FairnessOptions) => onFreshDatabase(label, (url) => fairnessRun(url, o));
  const alone: FairnessRun[] = [];
  const fair: FairnessRun[] = [];
  const unfair: FairnessRun[] = [];
  const check: FairnessRun[] = [];
  const latencyRow = (round: number, phase: string, tenant: boolean, r: FairnessRun) => {
    check.push(r);
    say(
      `| ${round} | ${phase} | ${tenant ? "on" : "off"} | ${ms(r.quietP50Ms)} | ${ms(r.quietP99Ms)} | ${ms(r.quietMaxMs)} | ${ms(r.quietAppendP50Ms)} | ${ms(r.quietAfterAppendP50Ms)} | ${ms(r.advanceCallP50Ms)} | ${ms(r.statementP50Ms)} / ${ms(r.statementP99Ms)} | ${ms(r.eventLoopDelayP99Ms)} | ${fmt(r.backlogLeftAtQuietDone)} | ${fmt(r.drainEps)} | ${loads(r)} |`,
    );
  };
  for (let round = 1; round <= rounds; round++) {
    const a = await run("faira", { ...base, events: 0, tenant: true });
    alone.push(a);
    latencyRow(round, "(a) B alone (A absent)", true, a);
    // the two behind-A phases alternate their order between rounds
    for (const tenant of round % 2 === 1 ? [true, false] : [false, true]) {
      const r = await run(tenant ? "fairb" : "fairc", { ...base, tenant });
      (tenant ? fair : unfair).push(r);
      latencyRow(round, tenant ? "(b) B behind A's backlog" : "(c) B behind A's backlog", tenant, r);
    }
  }

  say(
    `\n(d) A's drain alone (B idle: ${fmt(base.events)} events over ${fmt(base.keys)} keys, advanced, then drained by the ${base.consumers} consumers), tenant on and off alternated:\n`,
  );
  say("| run | tenant | A drain events/s | A advance events/s | load |\n|---|---|---|---|---|");
  const on: FairnessRun[] = [];
  const off: FairnessRun[] = [];
  for (let i = 0; i < pairs * 2; i++) {
    // on, off, off, on, on, off …: neither always goes first
    const tenant = i % 4 === 0 || i % 4 === 3;
    const r = await run(tenant ? "fairon" : "fairoff", { ...base, quietEvents: 0, tenant });
    (tenant ? on : off).push(r);
    check.push(r);
    say(`| ${i + 1} | ${tenant ? "on" : "off"} | ${fmt(r.drainEps)} | ${fmt(r.advanceEps)} | ${loads(r)} |`);
  }

  const p50 = (runs: FairnessRun[]) => median(runs.map((r) => r.quietP50Ms));
  const ratioB = p50(fair) / p50(alone);
  const eps = (runs: FairnessRun[]) => median(runs.map((r) => r.drainEps));
  const advance = (runs: FairnessRun[]) => median(runs.map((r) => r.advanceEps));
  const ratioA = eps(on) / eps(off);
  const violations = check.reduce((n, r) => n + r.violations, 0);
  const duplicates = check.reduce((n, r) => n + r.duplicates, 0);
  const mismatched = check.reduce((n, r) => n + r.tenantMismatched, 0);
  say(
    `\nB's p50 behind A's backlog with the tenant ÷ B's p50 alone: **${ratioB.toFixed(2)}×** (medians over ${rounds} round${rounds > 1 ? "s" : ""}: ${ms(p50(fair))} ÷ ${ms(p50(alone))} ms; the target: ≤ 2×); without the tenant B waited ${ms(p50(unfair))} ms (p50). ` +
      `A's drain alone with the tenant ÷ without: **${ratioA.toFixed(2)}** (medians ${fmt(eps(on))} ÷ ${fmt(eps(off))} events/s; the target: ≥ 0.90); A's advance ${fmt(advance(on))} ÷ ${fmt(advance(off))} events/s. ` +
      `Every phase: ${violations} out of order, ${duplicates} handled twice, ${mismatched} tenant mismatches.`,
  );
  return {
    fairness_quiet_p50_ratio: Number(ratioB.toFixed(2)),
    fairness_quiet_alone_p50_ms: p50(alone),
    fairness_quiet_p50_ms: p50(fair),
    fairness_quiet_p50_ms_without_tenant: p50(unfair),
    fairness_drain_ratio: Number(ratioA.toFixed(3)),
    fairness_drain_eps: Math.round(eps(on)),
    fairness_drain_eps_without_tenant: Math.round(eps(off)),
    fairness_violations: violations,
  };
}
