// Figures of one reliability scenario (issue: "each scenario prints its figures"); the global
// setup (test/setup/chaos.ts) prints the totals after the run.
import type { ChildProcess } from "node:child_process";
import { appendFileSync } from "node:fs";
import { inject } from "vitest";
import { sleep } from "./corq.js";
import { present } from "./present.js";

export interface ScenarioFigures {
  scenario: string;
  /** Events the scenario produced and checked. */
  events: number;
  /** Committed events never handled. */
  lost: number;
  /** Keys whose first deliveries were not in log order. */
  order: number;
  /** Times one key was handled by two holders at once. */
  doubleClaims: number;
  /** Deliveries beyond the first (at-least-once: after crashes, expiries and retries). */
  dup: number;
  /** Anything else worth printing (kills, restarts, 503s, …). */
  notes?: Record<string, number | string>;
}

export function reportScenario(figures: ScenarioFigures): void {
  const notes = Object.entries(figures.notes ?? {})
    .map(([k, v]) => ` ${k}=${v}`)
    .join("");
  console.log(
    `chaos scenario ${figures.scenario}: events=${figures.events} lost=${figures.lost} order=${figures.order} ` +
      `double_claims=${figures.doubleClaims} dup=${figures.dup}${notes}`,
  );
  appendFileSync(inject("chaosFile"), `${JSON.stringify(figures)}\n`);
}

/**
 * Checks deliveries against the truth: `expected` maps each key to its events' positions in
 * log order; `deliveries` lists (key, position) in the order the handlers saw them.
 */
export function tally(expected: Map<string, number[]>, deliveries: { key: string; position: number }[]) {
  const firsts = new Map<string, number[]>();
  const seen = new Set<string>();
  let dup = 0;
  for (const d of deliveries) {
    const id = `${d.key}\u0000${d.position}`;
    if (seen.has(id)) {
      dup++;
      continue;
    }
    seen.add(id);
    firsts.set(d.key, [...(firsts.get(d.key) ?? []), d.position]);
  }
  let events = 0;
  let lost = 0;
  let order = 0;
  for (const [key, positions] of expected) {
    events += positions.length;
    lost += positions.filter((p) => !seen.has(`${key}\u0000${p}`)).length;
    const got = (firsts.get(key) ?? []).filter((p) => positions.includes(p));
    if (
      got.some(
        (p, i) => i > 0 && positions.indexOf(p) < positions.indexOf(present(got[i - 1], "the previous delivery")),
      )
    )
      order++;
  }
  return { events, lost, order, dup };
}

/** One handler run of one event, as the kill scenarios record it (the handling process and its batch's span). */
export interface HandledRow {
  pid: number;
  key: string;
  position: number;
  started_at: Date;
  finished_at: Date;
}

/**
 * What a scenario that SIGKILLs processes checks beyond `tally`: `doubleClaims`, batches of one
 * key (a batch: one process's run from its start) that overlapped in time — two holders at once;
 * and `dupWithoutCrash`, events handled again although the process that handled them first was
 * not killed afterwards (a duplicate must follow a crash).
 */
export function killFigures(handled: HandledRow[], killed: Set<number>) {
  const firstBy = new Map<number, number>();
  let dupWithoutCrash = 0;
  for (const h of handled) {
    const first = firstBy.get(h.position);
    if (first === undefined) firstBy.set(h.position, h.pid);
    else if (!killed.has(first)) dupWithoutCrash++;
  }
  const byKey = new Map<string, Map<string, { start: number; end: number }>>();
  for (const h of handled) {
    const batches = byKey.get(h.key) ?? new Map<string, { start: number; end: number }>();
    byKey.set(h.key, batches);
    batches.set(`${h.pid}/${+h.started_at}`, { start: +h.started_at, end: +h.finished_at });
  }
  let doubleClaims = 0;
  for (const batches of byKey.values()) {
    const list = [...batches.values()].sort((a, b) => a.start - b.start);
    for (const [i, batch] of list.entries()) {
      const before = list[i - 1]; // none before the first
      if (before !== undefined && batch.start < before.end) doubleClaims++;
    }
  }
  return { doubleClaims, dupWithoutCrash };
}

/** A small deterministic PRNG (mulberry32): the same draws every run from one seed. */
export function seededRandom(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The seed of a kill scenario's choices (streams, batch sizes, victims, pauses): CORQ_CHAOS_SEED
 * when set (to replay a run), a new one in the soak (CORQ_CHAOS_SCALE > 1), else a fixed one, so
 * `npm test` draws the same every run. Scenarios print it.
 */
export function chaosSeed(fixed: number): number {
  if (process.env.CORQ_CHAOS_SEED) return Number(process.env.CORQ_CHAOS_SEED);
  return Number(process.env.CORQ_CHAOS_SCALE ?? 1) > 1 ? Math.floor(Math.random() * 2 ** 31) : fixed;
}

/**
 * The kill scenarios' load: batches of 1–5 `eventName` events to random streams (`streams`
 * names) until at least `events` are appended and the kills are over; meanwhile, after 1.5 s
 * (the first consumers at work), `kills` times a live child picked at random is handed to
 * `kill` (which SIGKILLs and replaces it), 250–500 ms apart. `afterKills` runs before appending
 * may stop. Every draw comes from `random`. Returns how many events were appended.
 */
export async function appendWhileKilling(options: {
  random: () => number;
  append: (stream: string, events: { name: string; data: { i: number } }[]) => Promise<unknown>;
  eventName: string;
  streams: string[];
  events: number;
  kills: number;
  children: Set<ChildProcess>;
  kill: (victim: ChildProcess) => void;
  afterKills?: () => Promise<void>;
}): Promise<number> {
  const { random, streams } = options;
  const pick = <T>(list: T[]): T | undefined => list[Math.floor(random() * list.length)];
  let appended = 0;
  let killsOver = false;
  const appending = (async () => {
    while (appended < options.events || !killsOver) {
      const count = 1 + Math.floor(random() * 5);
      const stream = pick(streams) ?? "stream";
      await options.append(
        stream,
        Array.from({ length: count }, (_, i) => ({ name: options.eventName, data: { i: appended + i } })),
      );
      appended += count;
      await sleep(random() * 8);
    }
  })();
  try {
    await sleep(1500);
    for (let kill = 0; kill < options.kills; kill++) {
      const victim = pick([...options.children].filter((c) => c.pid !== undefined && c.exitCode === null));
      if (victim) options.kill(victim);
      await sleep(250 + random() * 250);
    }
    await options.afterKills?.();
  } finally {
    killsOver = true;
  }
  await appending;
  return appended;
}
