// What issue 48's fault scenarios share (test/chaos/faults.chaos.test.ts, workerFaults.chaos.test.ts):
// the load's shape, serve watched for exits, and one check of the figures (test/helpers/faultLoad.ts).
// No event may wait for a lease: with leases of LEASE_MS (10 s), every event's first delivery
// comes within BOUND_MS (4 s) of its append, beyond the time the database was unreachable (a
// restart's downtime; a terminated connection is none). Measured without a lost lease: 0.7–2.3 s
// at most per scenario at load 3–12 (2 cores, shared). A batch whose settle, claim or advance is
// lost with its connection and left to its lease comes 10 s late (9.4–10.4 s on 8ee0528, before
// the statement retries of 4c74cf1), or 10 s less the downtime after a restart (6.7 s there): the
// bound fails both. (Issue 48's target, 2 s, is measured by bench/faults.ts over minutes.)
import { afterEach, expect } from "vitest";
import { localVars } from "../../cli/dev/localDatabase.js";
import { reportScenario, type ScenarioWatch } from "./chaos.js";
import { terminateBackends, type FaultFigures } from "./faultLoad.js";
import { startServeProcess } from "./serveProcess.js";

const scale = Number(process.env.CORQ_CHAOS_SCALE ?? 1);
export const DURATION_MS = 20_000 * scale;
export const LEASE_MS = 10_000;
export const BOUND_MS = 4000;
export const TIMEOUT_MS = 150_000 + DURATION_MS;
export const secrets = { CORQ_ADMIN_TOKEN: "dev-admin-token", CORQ_WEBHOOK_SECRET: "dev-webhook-secret" };
/** 30 HTTP appends/s and 10 library appends/s, as issue 48 measured; a lost event has 3 leases to come late. */
export const load = { httpRate: 30, libraryRate: 10, streams: 20, leaseMs: LEASE_MS, settleMs: 3 * LEASE_MS };

/**
 * The scenarios' terminations: every backend of `databaseUrl`'s database (but the killer's own)
 * ended every 200 ms–2 s, counted in `counts`.
 */
export function everyBackendEnded(
  serverUrl: string,
  databaseUrl: string,
  random: () => number,
  counts: { rounds: number; backends: number; at: number[] },
) {
  const databaseName = new URL(databaseUrl).pathname.slice(1);
  return terminateBackends({ serverUrl, databaseName, random, minMs: 200, maxMs: 2000, counts });
}

/** Stops a watched serve (SIGTERM), checks the scenario's figures with its exits and log, and gives serve's exit code. */
export async function stopAndCheck(
  served: Awaited<ReturnType<typeof watchedServe>>,
  check: { scenario: string; watch: ScenarioWatch; figures: FaultFigures; notes: Record<string, number | string> },
): Promise<number | null | undefined> {
  const exitedEarly = served.exitedEarly();
  const stopped = await served.stop();
  checkFaults(check.scenario, check.watch, check.figures, {
    exits: exitedEarly === undefined ? 0 : 1,
    log: served.log(check.figures.startedAt),
    notes: check.notes,
  });
  return stopped;
}

/** The test file's cleanups, run after each test (last registered first). */
export function useCleanups() {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  });
  return cleanups;
}

/** `npm run serve` on `databaseUrl`, watched: it must not exit until the test stops it (then with 0). */
export async function watchedServe(
  databaseUrl: string,
  watch: ScenarioWatch,
  cleanups: (() => Promise<unknown>)[],
  env: Record<string, string> = {},
) {
  const serve = await startServeProcess({ databaseUrl, env: { ...localVars, ...secrets, ...env } });
  // what it prints, line by line with the time it came (a failure's report says when)
  const lines: { at: number; line: string }[] = [];
  for (const stream of [serve.child.stdout, serve.child.stderr])
    stream?.on("data", (chunk: Buffer) => {
      for (const line of chunk.toString().split("\n")) if (line.trim()) lines.push({ at: Date.now(), line });
    });
  let stopping = false;
  let exitedEarly: number | null | undefined;
  void serve.exited.then((code) => {
    if (stopping) return;
    exitedEarly = code;
    watch.fail(`serve (pid ${serve.child.pid}) exited (${code}): ${serve.output().slice(-3000)}`);
  });
  cleanups.push(() => serve.stop("SIGKILL"));
  return {
    serve,
    /** undefined while it runs (or once stopped by the test) */
    exitedEarly: () => exitedEarly,
    /** Its output since it was ready, each line with its time in ms after `since`. */
    log: (since: number) => lines.map((l) => `+${l.at - since} ${l.line}`).join("\n"),
    async stop() {
      stopping = exitedEarly === undefined;
      return stopping ? serve.stop("SIGTERM") : exitedEarly;
    },
  };
}

/** Prints and asserts a scenario's figures: no exit, nothing lost or reordered, no event late by a lease. */
export function checkFaults(
  scenario: string,
  watch: ScenarioWatch,
  figures: FaultFigures,
  extra: { exits: number; notes: Record<string, number | string>; log?: string },
) {
  const late = figures.late(BOUND_MS);
  const counts = {
    exits: extra.exits,
    push_lost: figures.push.lost,
    code_lost: figures.code.lost,
    push_order: figures.push.order,
    code_order: figures.code.order,
    push_late: late.push,
    code_late: late.code,
    http_500: figures.httpStatuses["500"] ?? 0,
  };
  if (!watch.expectZero(counts)) {
    watch.fail(
      `worst deliveries (ms beyond the outage; +ms after the load began): ${figures.worst.map((w) => `${w.subscription} ${w.key}@${w.position} appended at +${w.appendedAt} ms: ${w.lateMs} ms late${w.attempt ? ` (attempt ${w.attempt})` : ""}`).join(", ")}`,
    );
    for (const key of new Set(figures.worst.slice(0, 2).map((w) => w.key)))
      console.log(`${scenario}: deliveries of ${key} (+ms after the load began): ${figures.history(key)}`);
    if (extra.log) console.log(`${scenario}: the runtime's log (+ms after the load began):\n${extra.log.slice(-6000)}`);
  }
  watch.expectEqual("events in the log vs appends acknowledged", figures.events, figures.appends.acknowledged);
  reportScenario({
    scenario,
    events: figures.events,
    lost: figures.push.lost + figures.code.lost,
    order: figures.push.order + figures.code.order,
    doubleClaims: 0,
    dup: figures.push.dup + figures.code.dup,
    notes: {
      ...extra.notes,
      exits: extra.exits,
      max_late_ms: figures.maxLateMs,
      unreachable_ms: figures.unreachableMs,
      outages_at_ms: figures.outages.map((o) => `${o.from - figures.startedAt}-${o.to - figures.startedAt}`).join(","),
      push_deliveries: figures.push.deliveries,
      code_deliveries: figures.code.deliveries,
      http: JSON.stringify(figures.httpStatuses),
      http_problems: JSON.stringify(figures.httpProblems),
      library_errors: JSON.stringify(figures.libraryErrors),
      consume_errors: JSON.stringify(figures.consumeErrors),
    },
  });
  expect(counts).toEqual(Object.fromEntries(Object.keys(counts).map((k) => [k, 0])));
  expect(figures.events).toBe(figures.appends.acknowledged);
  expect(figures.events).toBeGreaterThan(0);
}
