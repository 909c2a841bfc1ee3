// Before / after for the library's stages, in one process: `npx tsx bench/stagesAB.ts --before <checkout>
// [--measure consume|e2e|latency] [--rounds 5] [--rate 1000] [--seconds 8]`; or this checkout on two
// servers, in turns: `--server <url>` (e.g. Debian's PostgreSQL 15 from infra/systemPostgres.sh)
// against the embedded 18, instead of `--before`.
// Loads this checkout's bench/systems/corq.ts and the other checkout's (a `git worktree` of the code to
// compare with, its node_modules linked), then runs the same stage with each in turn, round after
// round, each run on a fresh database of one embedded Postgres: consume (1k keys × 20 events, 8
// consumers), e2e (20,000 events over 1,000 keys, 8 consumers) or latency (append→handler at a fixed
// rate, the library loop). Both share the process and its JIT, so their ratio is what to read. Every
// line has the machine's load average beside it; the last line gives each side's median [min–max].
// consume and e2e run warm (the bench's WARMUP handled first) unless `--cold`; a checkout from
// before the warm-up (2026-12-03) always runs them from cold, so compare it with `--cold`.
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { startEmbeddedPostgres } from "../cli/dev/embeddedPostgres.js";
import { present } from "../test/helpers/present.js";
import { dropDatabase, freshDatabase } from "./database.js";
import * as here from "./systems/corq.js";

const argv = process.argv.slice(2);
const value = (name: string, fallback?: string) => {
  const at = argv.indexOf(name);
  return at >= 0 ? present(argv[at + 1], `a value after ${name}`) : present(fallback, `${name} <value>`);
};
const server = argv.includes("--server") ? value("--server") : undefined;
const before = server === undefined ? resolve(value("--before")) : undefined;
const measure = value("--measure", "consume");
const rounds = Number(value("--rounds", "5"));
const rate = Number(value("--rate", "1000"));
const seconds = Number(value("--seconds", "8"));
const warmup = !argv.includes("--cold");
if (!["consume", "e2e", "latency"].includes(measure)) throw new Error("--measure: consume, e2e or latency");

const other = before === undefined ? here : ((await import(`${before}/bench/systems/corq.ts`)) as typeof here);
const sides: { label: string; system: typeof here; server?: string; figures: number[] }[] =
  server === undefined
    ? [
        { label: `before (${before})`, system: other, figures: [] },
        { label: "after (this checkout)", system: here, figures: [] },
      ]
    : [
        { label: "embedded PostgreSQL 18", system: here, figures: [] },
        { label: `${server.replace(/:[^:@/]*@/, ":…@")}`, system: here, server, figures: [] },
      ];
const workload = { events: 20_000, keys: 1000, consumers: 8, batchSize: 100 };
const load = () => present(loadavg()[0], "the 1-minute load average").toFixed(2);
const percentile = (sorted: number[], p: number) =>
  present(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))], "a sample");

const pg = await startEmbeddedPostgres();
try {
  for (let round = 1; round <= rounds; round++)
    for (const side of sides) {
      const url = await freshDatabase(side.server ?? pg.url, "ab");
      const loadBefore = load();
      let line: string;
      if (measure === "latency") {
        const measured = await side.system.latency(url, { rate, seconds, consumers: 8 });
        // a checkout from before the warm-up returned the samples alone (its first second among them)
        const samples = (Array.isArray(measured) ? measured : measured.samples).sort((a, b) => a - b);
        side.figures.push(percentile(samples, 50));
        line = `p50 ${percentile(samples, 50)} ms, p99 ${percentile(samples, 99)} ms, ${samples.length} events`;
      } else {
        const run =
          measure === "consume"
            ? side.system.consumeStage(url, workload, undefined, { warmup })
            : side.system.endToEnd(url, workload, { warmup });
        const eps = Math.round((await run).eps);
        side.figures.push(eps);
        line = `${eps.toLocaleString("en")} events/s`;
      }
      console.log(`round ${round} ${side.label}: ${line} (load ${loadBefore} → ${load()})`);
      await dropDatabase(side.server ?? pg.url, url);
    }
} finally {
  await pg.stop();
}
const median = (figures: number[]) =>
  present([...figures].sort((a, b) => a - b)[Math.floor(figures.length / 2)], "a run");
console.log(
  sides
    .map((s) => `${s.label}: median ${median(s.figures)} [${Math.min(...s.figures)}–${Math.max(...s.figures)}]`)
    .join("; ") + (measure === "latency" ? " (p50 ms)" : " (events/s)"),
);
