// Figures of one reliability scenario (issue: "each scenario prints its figures"); the global
// setup (test/setup/chaos.ts) prints the totals after the run.
import { appendFileSync } from "node:fs";
import { inject } from "vitest";

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
    if (got.some((p, i) => i > 0 && positions.indexOf(p) < positions.indexOf(got[i - 1]))) order++;
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
    for (let i = 1; i < list.length; i++) if (list[i].start < list[i - 1].end) doubleClaims++;
  }
  return { doubleClaims, dupWithoutCrash };
}
