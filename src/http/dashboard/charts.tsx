// Server-rendered SVG charts: a sparkline of events/s and the batch timeline (Gantt).
import type { BatchRecord } from "../../index.js";
import { age, num } from "./layout.js";

/** Events per second over the buckets given (oldest first). */
export function Sparkline(props: { values: number[]; label: string }) {
  const width = 120;
  const height = 26;
  const max = Math.max(1, ...props.values);
  const step = props.values.length > 1 ? width / (props.values.length - 1) : width;
  const points = props.values.map(
    (v, i) => `${(i * step).toFixed(1)},${(height - 2 - (v / max) * (height - 4)).toFixed(1)}`,
  );
  const now = props.values.at(-1) ?? 0;
  return (
    <span>
      <svg
        class="spark"
        width={width}
        height={height}
        viewBox={`0 0 ${width} ${height}`}
        role="img"
        aria-label={props.label}
      >
        <polyline points={points.join(" ")} />
      </svg>{" "}
      <span class="muted">{num(Math.round(now))}/s</span>
    </span>
  );
}

const LABEL_WIDTH = 230;
const ROW = 18;
const AXIS = 22;

/** Keys in natural order: "v-2" before "v-10" (digits compare as numbers). */
export const naturalOrder = new Intl.Collator("en", { numeric: true }).compare;

/** Failures drawn last, over the acked bars of the same slot. */
const drawOrder: Record<BatchRecord["outcome"], number> = { acked: 0, expired: 1, failed: 2, dead: 3 };

/**
 * Recent batches drawn per key (rows) over time (x), coloured by outcome: one key's batches
 * never overlap (one lease at a time), different keys' batches run side by side. The axis is
 * the whole window, `from` to `to`, however few batches there are.
 */
export function Timeline(props: {
  batches: (BatchRecord & { batches?: number })[];
  from: number;
  to: number;
  maxKeys: number;
  width?: number;
}) {
  const width = props.width ?? 1100;
  const plot = width - LABEL_WIDTH - 10;
  // rows: the keys with the latest batches, in natural key order
  const keyOf = (b: BatchRecord) => `${b.subscription} · ${b.key}`;
  const latest = new Map<string, number>();
  for (const b of props.batches) latest.set(keyOf(b), Math.max(latest.get(keyOf(b)) ?? 0, Date.parse(b.finishedAt)));
  const rows = [...latest.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, props.maxKeys)
    .map(([key]) => key)
    .sort(naturalOrder);
  const rowOf = new Map(rows.map((key, i) => [key, i]));
  // the whole window: zooming in on the batches there were made "15 min" show the last ~95 s
  const from = props.from;
  const span = Math.max(1, props.to - from);
  const x = (t: number) => LABEL_WIDTH + Math.max(0, Math.min(1, (t - from) / span)) * plot;
  const height = AXIS + rows.length * ROW + 6;
  const tickMs = pickTick(span);
  const ticks: number[] = [];
  for (let t = props.to; t >= from; t -= tickMs) ticks.push(t);

  return (
    <svg
      class="timeline"
      viewBox={`0 0 ${width} ${height}`}
      role="img"
      aria-label={`Timeline of ${props.batches.length} batches over ${rows.length} keys`}
    >
      {ticks.map((t) => (
        <g>
          <line x1={x(t)} x2={x(t)} y1={AXIS - 4} y2={height} stroke="#e4e8ee" />
          <text x={x(t)} y={14} text-anchor={t === props.to ? "end" : "middle"}>
            {t === props.to ? "now" : tickLabel(props.to - t, tickMs)}
          </text>
        </g>
      ))}
      {rows.map((key, i) => (
        <text x={LABEL_WIDTH - 6} y={AXIS + i * ROW + 13} text-anchor="end">
          {key.length > 36 ? `…${key.slice(-35)}` : key}
        </text>
      ))}
      {[...props.batches]
        .sort((a, b) => drawOrder[a.outcome] - drawOrder[b.outcome])
        .map((b) => {
          const row = rowOf.get(keyOf(b));
          if (row === undefined) return null;
          const start = x(Date.parse(b.startedAt));
          const barWidth = Math.max(2, x(Date.parse(b.finishedAt)) - start);
          const ms = Date.parse(b.finishedAt) - Date.parse(b.startedAt);
          return (
            <rect
              class={b.outcome}
              x={start.toFixed(1)}
              y={AXIS + row * ROW + 3}
              width={barWidth.toFixed(1)}
              height={ROW - 6}
              rx="2"
            >
              <title>
                {`${keyOf(b)}: ${b.batches === undefined || b.batches === 1 ? "" : `${b.batches} batches, `}${b.outcome}, ${b.events} events, ${age(ms)}`}
              </title>
            </rect>
          );
        })}
    </svg>
  );
}

/**
 * A tick's label in the unit of the tick spacing, so labels are exact and distinct (age()
 * rounds: 3 min and 3.5 min both read "-3 min").
 */
export function tickLabel(beforeNowMs: number, tickMs: number): string {
  if (tickMs % 60_000 === 0) return `-${beforeNowMs / 60_000} min`;
  return `-${beforeNowMs / 1000} s`;
}

function pickTick(spanMs: number): number {
  for (const tick of [1000, 5000, 10_000, 15_000, 30_000, 60_000, 300_000, 600_000])
    if (spanMs / tick <= 10) return tick;
  return 1_800_000;
}

export function Legend() {
  return (
    <p class="legend">
      <span>
        <i class="acked"></i>acked
      </span>
      <span>
        <i class="failed"></i>failed (will retry)
      </span>
      <span>
        <i class="dead"></i>dead-lettered
      </span>
      <span>
        <i class="expired"></i>lease expired
      </span>
    </p>
  );
}
