// The benchmark section of the self-hosted Node runtime (issue 16): append→handler latency
// through one `npm run serve` process at fixed rates, beside the library's own polling drain
// loop at the same rates in the same run; its CPU under load and idle; NOTIFY's cost to
// appends; how fast another process takes the keys a SIGTERMed one released.
import { loadavg } from "node:os";
import * as corq from "./systems/corq.js";
import { notifyCost, serveLatency, shutdownPickup } from "./serve.js";
import { freshDatabase, dropDatabase } from "./database.js";
import { percentile } from "./stats.js";

const fmt = (n: number) => Math.round(n).toLocaleString("en");
const ms = (n: number) => (Number.isNaN(n) ? "—" : n < 10 ? n.toFixed(1) : fmt(n));

export async function serveSection(options: {
  quick: boolean;
  say: (line: string) => void;
  onFreshDatabase: <T>(label: string, fn: (url: string) => Promise<T>) => Promise<T>;
  /** The benchmark's Postgres server (databases are made and dropped on it). */
  serverUrl: string;
}) {
  const { quick, say, onFreshDatabase, serverUrl } = options;
  const seconds = quick ? 4 : 8;
  const results: Record<string, unknown> = {};
  say(
    `load average at the start: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" / ")} (1 / 5 / 15 min; 2 cores shared with other work)`,
  );
  say(
    "\nSingle-event appends at a fixed rate (the library loop's workload: 8 streams, key data.key over 1,000 keys), consumed by one serve process (CORQ_CONCURRENCY 8, no-op handler), appended over HTTP to it or from the library (`notify: true`); latency from when the append was due (a producer that falls behind counts) to the handler, and from the append's start in the database (createdAt, 1 ms resolution) to the handler. Beside it, the library's own drain loop (8 consumers polling, bench/systems/corq.ts) on the same workload.",
  );
  say(
    "| offered appends/s | serve, HTTP appends: p50 / p99 ms | in database p50 / p99 | serve CPU | serve, library appends: p50 / p99 ms | serve CPU | library loop (polling) p50 / p99 ms |\n|---|---|---|---|---|---|---|",
  );
  for (const rate of quick ? [200, 1000] : [100, 200, 500, 1000]) {
    const http = await onFreshDatabase("serve", (url) => serveLatency(url, { rate, seconds }));
    const lib = await onFreshDatabase("servel", (url) => serveLatency(url, { rate, seconds, via: "library" }));
    const { samples: loop } = await onFreshDatabase("loop", (url) =>
      corq.latency(url, { rate, seconds, consumers: 8 }),
    );
    const lost = http.lost + lib.lost;
    const refused = http.failed + lib.failed; // appends answered anything but 201, or not at all
    say(
      `| ${rate} | ${ms(http.p50Ms)} / ${ms(http.p99Ms)} | ${ms(http.inDatabaseP50Ms)} / ${ms(http.inDatabaseP99Ms)} | ${http.loadCpuPercent.toFixed(0)}% | ${ms(lib.p50Ms)} / ${ms(lib.p99Ms)} | ${lib.loadCpuPercent.toFixed(0)}% | ${ms(percentile(loop, 50))} / ${ms(percentile(loop, 99))} |${lost > 0 ? ` ${lost} lost!` : ""}${refused > 0 ? ` (${refused} appends refused)` : ""}`,
    );
    if (rate === 1000) {
      Object.assign(results, {
        p50_ms_1000: http.p50Ms,
        p99_ms_1000: http.p99Ms,
        library_appends_p50_ms_1000: lib.p50Ms,
        library_appends_p99_ms_1000: lib.p99Ms,
        library_loop_p50_ms_1000: percentile(loop, 50),
      });
      // each path against the target on its own (the best of the two would hide a miss)
      const verdict = (label: string, r: typeof http) =>
        `${label} p50 ${ms(r.p50Ms)} ${r.p50Ms <= 5 ? "met" : "**missed**"}, p99 ${ms(r.p99Ms)} ${r.p99Ms <= 50 ? "met" : "**missed**"}`;
      say(
        `\ntargets at 1,000/s (p50 ≤ 5 ms, p99 ≤ 50 ms): ${verdict("HTTP appends", http)}; ${verdict("library appends", lib)}`,
      );
    }
  }

  const idle = await onFreshDatabase("idle", (url) => serveLatency(url, { rate: 50, seconds: 1, idleSeconds: 10 }));
  say(
    `\nidle: the serve process used ${idle.idleCpuPercent?.toFixed(2)}% of one core over 10 s with nothing to do (safety net every 5 s, default)`,
  );
  results.idle_cpu_percent = idle.idleCpuPercent;

  const cost = await notifyCost(
    async (label) => {
      const url = await freshDatabase(serverUrl, label);
      return { url, drop: () => dropDatabase(serverUrl, url) };
    },
    { events: quick ? 4000 : 10_000, producers: 8, reps: quick ? 1 : 3 },
  );
  say(
    `\nNOTIFY's cost: single-event appends (one commit each, the worst case), 8 producers, a LISTEN connection open, library → database, alternating runs (median of ${quick ? 1 : 3}): without NOTIFY ${fmt(cost.withoutEps)} appends/s; NOTIFY after the commit, coalesced (what \`notify: true\` does) ${fmt(cost.afterEps)} (${((cost.afterEps / cost.withoutEps) * 100).toFixed(0)}%); NOTIFY inside the append's transaction (an outbox append) ${fmt(cost.insideEps)} (${((cost.insideEps / cost.withoutEps) * 100).toFixed(0)}%: such commits hold a global lock through their WAL flush, one at a time); spread ${cost.spread.without.toFixed(0)}% / ${cost.spread.after.toFixed(0)}% / ${cost.spread.inside.toFixed(0)}%`,
  );
  results.append_eps_without_notify = Math.round(cost.withoutEps);
  results.append_eps_notify_after_commit = Math.round(cost.afterEps);
  results.append_eps_notify_in_transaction = Math.round(cost.insideEps);

  const pickups: number[] = [];
  let exits = "";
  for (let rep = 0; rep < (quick ? 1 : 3); rep++) {
    const r = await onFreshDatabase("sigterm", (url) => shutdownPickup(url, { keys: 4 }));
    pickups.push(...r.pickupMs);
    exits += String(r.exit);
  }
  say(
    `\nSIGTERM with 4 batches in flight (CORQ_SHUTDOWN_MS=0: aborted at once, leases released), another serve process beside it: from the signal to its handler p50 ${ms(percentile(pickups, 50))} ms, max ${ms(Math.max(...pickups))} ms (target 100 ms; leases were 30 s); exit codes ${exits.split("").join(", ")}`,
  );
  results.sigterm_pickup_max_ms = Math.max(...pickups);
  return results;
}
