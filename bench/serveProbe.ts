// Where serve's time goes, and before/after in one run (issue 16's missed target): HTTP runs at
// fixed rates against one serve process each, variants alternating, every figure with the load
// average beside it, the database's commits per append, and optionally serve's CPU profile.
//
//   tsx bench/serveProbe.ts [--rates 200,1000] [--seconds 8] [--rounds 2] [--before <checkout>]
//                           [--profile] [--idle] [KEY=VALUE …]   (KEY=VALUE: more env for serve)
//
// --before: a checkout of the code to compare with (its bench/serveEntry.ts is started from there).
// --variants "after;pool32:CORQ_POOL_SIZE=32": configurations of this checkout, by label
// (STREAMS=64: the appends go to 64 streams instead of 8; VIA=library: appended from the
// library with notify: true instead of over HTTP; SPLIT=1: an API process and a worker process,
// CPU the sum of both).
import { loadavg } from "node:os";
import { mkdirSync } from "node:fs";
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";
import { benchClient, dropDatabase, freshDatabase } from "./database.js";
import { serveLatency } from "./serve.js";
import { present } from "../test/helpers/present.js";

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(name);
const value = (name: string, fallback: string) =>
  flag(name) ? present(argv[argv.indexOf(name) + 1], `a value after ${name}`) : fallback;
const rates = value("--rates", "200,1000").split(",").map(Number);
const seconds = Number(value("--seconds", "8"));
const rounds = Number(value("--rounds", "1"));
const before = flag("--before") ? value("--before", "") : undefined;
const extra = Object.fromEntries(argv.filter((a) => /^[A-Z_]+=/.test(a)).map((kv) => kv.split(/=(.*)/s, 2))) as Record<
  string,
  string
>;

const pg = process.env.DATABASE_URL ? undefined : await startEmbeddedPostgres();
const serverUrl = process.env.DATABASE_URL ?? pg?.url ?? "";
const load = () => present(loadavg()[0], "the 1-minute load average").toFixed(1);
const f = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? "—" : n < 10 ? n.toFixed(1) : n.toFixed(0));

async function run(label: string, rate: number, env: Record<string, string>, idle: boolean) {
  const url = await freshDatabase(serverUrl, "probe");
  const name = new URL(url).pathname.slice(1);
  const commits = async () => {
    const client = await benchClient(serverUrl);
    const { rows } = await client.query("SELECT xact_commit::bigint AS c FROM pg_stat_database WHERE datname = $1", [
      name,
    ]);
    await client.end();
    return Number(rows[0].c);
  };
  try {
    const loadBefore = load();
    const c0 = await commits();
    const { STREAMS: streams = "8", VIA: via = "http", ...serveEnv } = env;
    const r = await serveLatency(url, {
      rate,
      seconds,
      env: serveEnv,
      streams: Number(streams),
      via: via === "library" ? "library" : "http",
      idleSeconds: idle ? 10 : undefined,
    });
    const perAppend = ((await commits()) - c0) / (r.appends + 200);
    console.log(
      `| ${label} | ${rate} | ${f(r.p50Ms)} / ${f(r.p99Ms)} | ${f(r.requestP50Ms)} / ${f(r.requestP99Ms)} | ${f(r.inDatabaseP50Ms)} / ${f(r.inDatabaseP99Ms)} | ${r.loadCpuPercent.toFixed(0)}% | ${r.idleCpuPercent === undefined ? "—" : `${r.idleCpuPercent.toFixed(2)}%`} | ${perAppend.toFixed(2)} | ${f(r.sentLateP50Ms)} / ${f(r.sentLateP99Ms)} | ${r.producerCpuPercent.toFixed(0)}% | ${r.failed} | ${loadBefore} → ${load()} |`,
    );
    if (r.failure) console.log(`  first refusal: ${r.failure}`);
  } finally {
    await dropDatabase(serverUrl, url);
  }
}

try {
  console.log(
    "| code | appends/s | append→handler p50 / p99 ms | HTTP request p50 / p99 | in database p50 / p99 | serve CPU | idle CPU | commits per append | sent late p50 / p99 | producer CPU | refused | load avg (1 min) before → after |\n|---|---|---|---|---|---|---|---|---|---|---|---|",
  );
  // --variants "after;pool32:CORQ_POOL_SIZE=32,…": more configurations of this checkout
  const variants: [string, Record<string, string>][] = value("--variants", "after")
    .split(";")
    .map((spec) => {
      const [label, pairs = ""] = spec.split(/:(.*)/s);
      const env = Object.fromEntries(
        pairs
          .split(",")
          .filter(Boolean)
          .map((kv) => kv.split(/=(.*)/s, 2)),
      );
      return [label, { ...extra, ...env }] as [string, Record<string, string>];
    });
  if (before) variants.unshift(["before", { ...extra, SERVE_ROOT: before }]);
  for (let round = 0; round < rounds; round++) {
    for (const rate of rates) {
      // alternate which goes first, so neither always gets the quieter minute
      const ordered = round % 2 === 0 ? variants : [...variants].reverse();
      for (const [label, env] of ordered) {
        const profiled: Record<string, string> = flag("--profile")
          ? { NODE_ARGS: `--cpu-prof --cpu-prof-dir=/tmp/serve-prof-${label}-${rate}` }
          : {};
        if (flag("--profile")) mkdirSync(`/tmp/serve-prof-${label}-${rate}`, { recursive: true });
        await run(label, rate, { ...env, ...profiled }, flag("--idle") && rate === rates[0]);
      }
    }
  }
} finally {
  await pg?.stop();
}
