// `npm run bench -- --only sustained [--minutes 30] [--rate 2000]`: the sustained run's table,
// its verdict against issue 30's targets and two charts (bench/sustained-*.svg).
import { writeFileSync } from "node:fs";
import { lineChart } from "./charts.js";
import { formatRow, sustainedRun, tableHeader, type MinuteRow } from "./sustained.js";

const arg = (name: string, fallback: number) => {
  const at = process.argv.indexOf(`--${name}`);
  const value = at >= 0 ? Number(process.argv[at + 1]) : fallback;
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name}: a positive integer`);
  return value;
};

export async function sustainedSection(url: string, { quick, say }: { quick: boolean; say: (line: string) => void }) {
  const options = {
    minutes: arg("minutes", quick ? 3 : 30),
    rate: arg("rate", 2000),
    steps: 4,
    stepGapMs: 2000,
    customers: 20_000,
    retentionMs: arg("retention-minutes", 5) * 60_000,
    keyIdleMs: 60_000,
    consumers: 3,
    upkeepMs: 10_000,
  };
  say(
    `${options.minutes} minutes at ${options.rate.toLocaleString("en")} events/s offered: sagas of ${options.steps} events ${options.stepGapMs / 1000} s apart (a stream each), ` +
      `two subscriptions (key = stream; key = data.customer over ${options.customers.toLocaleString("en")} customers), ${options.consumers} drain loops each; ` +
      `retention ${options.retentionMs / 60_000} min, idle keys compacted after ${options.keyIdleMs / 1000} s, both passes every ${options.upkeepMs / 1000} s. ` +
      "Sizes include indexes and TOAST; `load` is the 1-minute load average (2 cores, shared).\n",
  );
  say(tableHeader);
  const result = await sustainedRun(url, { ...options, onRow: (row: MinuteRow) => say(formatRow(row)) });
  const { rows } = result;
  const p99 = (from: MinuteRow[]) => Math.max(...from.map((r) => r.p99Ms));
  const window = Math.min(5, Math.floor(rows.length / 2)) || 1;
  const first = p99(rows.slice(0, window));
  const last = p99(rows.slice(-window));
  say(
    `\nappended ${result.appended.toLocaleString("en")}, handled ${result.handled.toLocaleString("en")} (both subscriptions), ` +
      `lost ${result.lost}, out of order ${result.outOfOrder}, redelivered ${result.duplicates}; the producer ended ${Math.round(result.behindMs)} ms behind its schedule. ` +
      `p99 of the last ${window} minutes ${last} ms vs the first ${window}: ${first} ms (${(last / first).toFixed(2)}×).`,
  );
  const minutes = rows.map((r) => r.minute);
  writeFileSync(
    new URL("./sustained-latency.svg", import.meta.url),
    lineChart({
      title: "Sustained run: append→handler latency per minute",
      xLabel: "minute",
      yLabel: "ms",
      series: [
        { name: "p50", points: rows.map((r, i) => [minutes[i] ?? 0, r.p50Ms]) },
        { name: "p99", points: rows.map((r, i) => [minutes[i] ?? 0, r.p99Ms]) },
      ],
    }),
  );
  const mb = (r: MinuteRow, table: string) => (r.sizes[table] ?? 0) / 2 ** 20;
  writeFileSync(
    new URL("./sustained-sizes.svg", import.meta.url),
    lineChart({
      title: "Sustained run: table sizes (with indexes) per minute",
      xLabel: "minute",
      yLabel: "MB",
      series: ["events", "queue", "keys", "streams"].map((table) => ({
        name: table,
        points: rows.map((r) => [r.minute, mb(r, table)] as [number, number]),
      })),
    }),
  );
  say("\n![latency](sustained-latency.svg) ![sizes](sustained-sizes.svg)");
  return {
    sustained: {
      minutes: options.minutes,
      rate: options.rate,
      appended: result.appended,
      lost: result.lost,
      outOfOrder: result.outOfOrder,
      p99FirstMs: first,
      p99LastMs: last,
    },
  };
}
