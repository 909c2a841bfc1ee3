// Figures of one reliability scenario (issue: "each scenario prints its figures"); the global
// setup (test/setup/chaos.ts) prints the totals after the run.
import type { ChildProcess } from "node:child_process";
import { appendFileSync, writeSync } from "node:fs";
import { inject, onTestFinished } from "vitest";
import { sleep } from "./corq.js";
import { present } from "./present.js";
import { eventually } from "./until.js";

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
 * What a scenario says the moment it sees something wrong, before any assertion or teardown:
 * one line on stderr,
 *
 *   chaos FAILED <scenario> seed=<seed>: <reason>
 *
 * written synchronously to the process's own stderr (fd 2), not through vitest's console (which
 * the reporter prints at the end of the file): a soak cut short afterwards (a time limit,
 * Ctrl-C, a killed worker) still shows why. The scenario's assertions then fail as before.
 */
export interface ScenarioWatch {
  /** Prints `reason` now (every call: a scenario may see several things wrong). */
  fail(reason: string): void;
  /** Names the step the scenario is in: a timeout says where it hung. */
  step(name: string): void;
  /** `eventually(check)`; when it gives up: prints what it waited for and the last check's error, then throws it. */
  waitFor<T>(what: string, check: () => Promise<T>, options: { timeoutMs: number; intervalMs?: number }): Promise<T>;
  /**
   * Waits while `measure` (a count: kills, events handled) climbs to `target`, for as long as it
   * keeps climbing: gives up only when it stood still for `stallMs`, then prints where it stood
   * and throws. The time such work takes depends on the machine's load (a consumer process took
   * 10 to 33 s from its start to its n-th commit at load 10 to 20); a fixed budget fails a slow
   * machine, a stall fails a stuck run.
   * `done` (optional): a further check once the target is reached (retried like the measure).
   */
  waitForProgress(
    what: string,
    measure: () => number | Promise<number>,
    target: number,
    options: { stallMs: number; intervalMs?: number; done?: () => Promise<unknown> },
  ): Promise<void>;
  /** Prints when `child` exits unless `expected(code, signal)` says the scenario caused it (a kill, the teardown). */
  watchChild(
    child: ChildProcess,
    label: string,
    expected: (code: number | null, signal: NodeJS.Signals | null) => boolean,
  ): void;
  /** Prints the non-zero ones of `counts` (lost, order, double claims, …) as one reason; true if all were 0. */
  expectZero(counts: Record<string, number>): boolean;
  /** Prints `what` when `actual` is not `expected`; true if it is. */
  expectEqual(what: string, actual: unknown, expected: unknown): boolean;
}

/**
 * The watch of one scenario (call it in the test): `testTimeoutMs` is the test's own limit — a
 * little before it, a scenario still running prints the step it is in (vitest's "Test timed
 * out" names no cause, and comes at the end of the file). `write` is for the helper's own test.
 */
export function watchScenario(
  scenario: string,
  options: { seed?: number; testTimeoutMs: number; write?: (line: string) => void },
): ScenarioWatch {
  const write = options.write ?? ((line: string) => void writeSync(2, line));
  const started = Date.now();
  let step = "starting";
  const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const fail = (reason: string) => {
    const seed = options.seed === undefined ? "" : ` seed=${options.seed}`;
    write(
      `chaos FAILED ${scenario}${seed}: ${reason.replace(/\s*\n\s*/g, " ")} (at ${seconds(Date.now() - started)})\n`,
    );
  };
  const watchdog = setTimeout(
    () =>
      fail(
        `still ${step} after ${seconds(Date.now() - started)}: the test's limit is ${seconds(options.testTimeoutMs)}`,
      ),
    Math.max(0, options.testTimeoutMs - 2000),
  );
  watchdog.unref();
  onTestFinished(() => clearTimeout(watchdog));
  const describe = (error: unknown) => (error instanceof Error ? error.message : String(error));
  return {
    fail,
    step(name) {
      step = name;
    },
    async waitFor(what, check, waitOptions) {
      const since = Date.now();
      try {
        return await eventually(check, waitOptions);
      } catch (error) {
        fail(`timeout after ${seconds(Date.now() - since)} waiting for ${what}: ${describe(error)}`);
        throw error;
      }
    },
    async waitForProgress(what, measure, target, progressOptions) {
      const { stallMs, intervalMs = 100, done } = progressOptions;
      const since = Date.now();
      let best = Number.NEGATIVE_INFINITY;
      let movedAt = Date.now();
      let lastError: unknown;
      for (;;) {
        let reached = false;
        try {
          const now = await measure();
          lastError = undefined;
          if (now > best) [best, movedAt] = [now, Date.now()];
          reached = now >= target;
          if (reached) {
            await done?.();
            return;
          }
        } catch (error) {
          lastError = error; // a failing measure or `done` counts as no progress
        }
        if (Date.now() - movedAt > stallMs) {
          const at = best === Number.NEGATIVE_INFINITY ? "nothing measured" : `${best} of ${target}`;
          const why = lastError === undefined ? "" : `; last error: ${describe(lastError)}`;
          fail(
            `no progress for ${seconds(stallMs)} waiting for ${what}: ${at}${reached ? " (the target reached, the final check not)" : ""} after ${seconds(Date.now() - since)}${why}`,
          );
          throw lastError instanceof Error ? lastError : new Error(`no progress waiting for ${what}: ${at}`);
        }
        await sleep(intervalMs);
      }
    },
    watchChild(child, label, expected) {
      child.once("exit", (code, signal) => {
        if (!expected(code, signal))
          fail(`${label} (pid ${child.pid}) exited unexpectedly: code=${code} signal=${signal}`);
      });
    },
    expectZero(counts) {
      const wrong = Object.entries(counts).filter(([, n]) => n !== 0);
      if (wrong.length > 0) fail(wrong.map(([name, n]) => `${name}=${n}`).join(" "));
      return wrong.length === 0;
    },
    expectEqual(what, actual, expected) {
      const same = JSON.stringify(actual) === JSON.stringify(expected);
      if (!same)
        fail(`${what}: ${JSON.stringify(actual)?.slice(0, 300)}, expected ${JSON.stringify(expected)?.slice(0, 300)}`);
      return same;
    },
  };
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
 * may stop. Past `events`, a trickle (a batch every 100–200 ms): work for consumers still to be
 * killed, not a backlog that grows with the wait (at full pace, 8,280 events piled up in a
 * scale-2 exactly-once run of 1,000 at load 20, where a consumer took 20–30 s from its start to
 * its kill at a commit). Every draw comes from `random`. Returns how many events were appended.
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
      await sleep(appended < options.events ? random() * 8 : 100 + random() * 100);
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
