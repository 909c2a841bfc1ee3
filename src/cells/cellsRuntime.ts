// The HTTP API over a deployment of cells (`npm run serve` with CORQ_CELLS): the CorqRuntime the
// API (src/http/api.ts) calls, made of the cells (createCells) and each cell's runtime. A stream's
// writes and reads go to its tenant's cell; listings and counts cover every cell (summed, or
// merged in key order); subscription operations run in every cell. What lives once per
// deployment — tokens, alerts, the retention policy read back, the activity record the dashboard
// draws — is the home cell's: the first cell holds the directory too, so a deployment without
// its home cell is down anyway, and settings kept there need no copy to agree with.
// A log position is one cell's: a single cursor across cells (GET /events?after=, the tail's
// `before`, a rewind `to` a position) is refused with a 400 that says so, never guessed.
import { CorqError, present } from "../errors.js";
import { toPrometheus } from "../metrics.js";
import type { CorqRuntime } from "../runtimeTypes.js";
import type { CellsRuntime } from "./createCells.js";
import { everyCell as everyCellOf, inCell, settleEvery, sum } from "./fanOut.js";
import type { DoctorCode, DoctorFinding, KeyState, SubscriptionStats } from "../types.js";

export interface CellsRuntimeOptions {
  /** An append committed in `cell` (serve wakes that cell's runner, and NOTIFYs its other processes). */
  appended?: (cell: string) => void;
}

/** What GET /stats answers over cells: the summed stats, and each cell's (an unreachable one as its error). */
type CellsStats = Awaited<ReturnType<CorqRuntime["stats"]>> & {
  cells: Record<string, Awaited<ReturnType<CorqRuntime["stats"]>> | { error: string }>;
};

const perCell = (what: string, instead: string) =>
  new CorqError("invalid_input", `${what}: positions are per cell in a deployment of cells; ${instead}`);

export function cellsRuntime(
  { cells, runtimes, routedRead: routed }: CellsRuntime,
  options: CellsRuntimeOptions = {},
): CorqRuntime & { prometheus(): Promise<string> } {
  const names = cells.names;
  const home = cell(present(names[0], "the home cell"));
  function cell(name: string): CorqRuntime {
    return present(runtimes.get(name), `cell "${name}"'s runtime`);
  }
  const fleet = { names, cell };
  // every cell at once; each answer, or its error (a cell that is down does not hide the others)
  const settle = <T>(fn: (corq: CorqRuntime) => Promise<T>) => settleEvery(fleet, fn);
  // every cell; the first failure is thrown once all have answered, naming its cell
  const everyCell = async <T>(fn: (corq: CorqRuntime) => Promise<T>): Promise<T[]> => [
    ...(await everyCellOf(fleet, fn)).values(),
  ];
  const subscriptionOf = async (name: string) => mergeSubscriptions(await everyCell((corq) => corq.subscription(name)));

  const runtime: CorqRuntime & { prometheus(): Promise<string> } = {
    async migrate() {
      const { applied } = await cells.migrate();
      return { applied: applied[names[0] ?? ""] ?? [] };
    },
    async append(stream, events, appendOptions) {
      // Cells.append passes every option on to the cell's runtime (idempotencyScope too), though
      // its type names only Corq's
      const append = cells.append as CorqRuntime["append"];
      const result = await append(stream, events, appendOptions);
      const { cell: where } = await cells.place(stream);
      options.appended?.(where);
      return { ...result, cell: where };
    },
    readStream: (stream, readOptions) => cells.readStream(stream, readOptions),
    streamPage: (stream, pageOptions) => routed(stream, (corq) => corq.streamPage(stream, pageOptions)),
    eraseStream: (stream) => cells.eraseStream(stream),
    async readLog(logOptions = {}) {
      if (logOptions.after !== undefined)
        throw perCell("after", "read each cell's log with its own cursor (the library's Cells.readLog)");
      // the first page of every cell, each event with its cell, and the cursor per cell
      return (await cells.readLog({ limit: logOptions.limit })) as never;
    },
    async logTail(tailOptions = {}) {
      if (tailOptions.before !== undefined)
        throw perCell("before", "the newest events of every cell have no older page");
      const tails = await everyCell((corq) => corq.logTail({ limit: tailOptions.limit }));
      const events = tails
        .flatMap((tail, index) => tail.events.map((event) => ({ ...event, cell: names[index] })))
        .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0))
        .slice(0, tailOptions.limit ?? 50);
      return { events, next: null };
    },
    advance: (advanceOptions) => cells.advance(advanceOptions),
    consume: (subscription) => cells.consume(subscription),
    drain: (subscription, drainOptions) => cells.drain(subscription, drainOptions),
    async stats(): Promise<CellsStats> {
      const settled = await settle((corq) => corq.stats());
      const answered = settled.flatMap(({ result }) => (result.status === "fulfilled" ? [result.value] : []));
      // nothing to sum without the home cell's configuration
      if (settled[0]?.result.status === "rejected") throw inCell(settled[0].name, settled[0].result.reason);
      const byName = new Map<string, SubscriptionStats[]>();
      for (const stats of answered)
        for (const s of stats.subscriptions) byName.set(s.name, [...(byName.get(s.name) ?? []), s]);
      return {
        subscriptions: [...byName.values()].map(mergeSubscriptions),
        // positions are per cell: there is no one head
        log: {
          head: null,
          events: sum(answered.map((s) => s.log.events)),
          eventsEstimated: answered.some((s) => s.log.eventsEstimated),
        },
        cells: Object.fromEntries(
          settled.map(({ name, result }) => [
            name,
            result.status === "fulfilled" ? result.value : { error: errorText(result.reason) },
          ]),
        ),
      };
    },
    subscription: subscriptionOf,
    async keys(subscription, keyOptions) {
      return (await runtime.keyPage(subscription, keyOptions)).keys;
    },
    async keyPage(subscription, keyOptions = {}) {
      // each cell's page in key order, merged (compared as code points: exact where the cells'
      // databases collate keys in the C order, corq's embedded Postgres does)
      const limit = keyOptions.limit ?? 100;
      const pages = await everyCell((corq) => corq.keyPage(subscription, keyOptions));
      const merged = pages
        .flatMap((page, index) => page.keys.map((key) => ({ ...key, cell: names[index] })))
        .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      const keys = merged.slice(0, limit);
      const more = merged.length > limit || pages.some((page) => page.next !== null);
      return { keys, next: more ? (keys.at(-1)?.key ?? null) : null };
    },
    async key(subscription, key) {
      return present((await cells.key(subscription, key))[0], "the key");
    },
    // in every cell (a key may have events in several); the answer is the cell's that has most of it
    pauseKey: async (subscription, key) => mostOf(await everyCell((corq) => corq.pauseKey(subscription, key))),
    resumeKey: async (subscription, key) => mostOf(await everyCell((corq) => corq.resumeKey(subscription, key))),
    rewind: (subscription, rewindOptions) => cells.rewind(subscription, rewindOptions),
    deadLetters: (deadOptions) => cells.deadLetters(deadOptions),
    releaseDeadLetters: (releaseOptions) => cells.releaseDeadLetters(releaseOptions),
    putSubscription: (name, input) => cells.putSubscription(name, input),
    deleteSubscription: (name) => cells.deleteSubscription(name),
    pause: (subscription) => cells.pause(subscription),
    resume: (subscription) => cells.resume(subscription),
    // the dashboard's activity and timeline: the home cell's (see the top of this file)
    activity: (activityOptions) => home.activity(activityOptions),
    throughput: (throughputOptions) => home.throughput(throughputOptions),
    timeline: (timelineOptions) => home.timeline(timelineOptions),
    async pruneActivity(pruneOptions) {
      return { pruned: sum((await everyCell((corq) => corq.pruneActivity(pruneOptions))).map((r) => r.pruned)) };
    },
    async metrics() {
      throw new CorqError(
        "invalid_input",
        "metrics are per cell: GET /metrics renders each cell's with a `cell` label",
      );
    },
    // every cell's Prometheus text, each sample labelled with its cell (sum(...) by … in PromQL for totals)
    async prometheus() {
      const texts = await everyCell(async (corq) => toPrometheus(await corq.metrics()));
      return labelledByCell(names, texts);
    },
    async doctor(doctorOptions) {
      const settled = await settle((corq) => corq.doctor(doctorOptions));
      const findings = settled.flatMap(({ name, result }): DoctorFinding[] =>
        result.status === "fulfilled"
          ? result.value.findings.map((f) => ({ ...f, message: `cell "${name}": ${f.message}` }))
          : [
              {
                severity: "error",
                // (a code of cells' own: DoctorCode lists one database's)
                code: "cell_unavailable" as DoctorCode,
                message: `cell "${name}": ${errorText(result.reason)}`,
                fix: `bring cell "${name}"'s database back; its tenants' appends answer 503 meanwhile`,
              },
            ],
      );
      const ok = settled.every(({ result }) => result.status === "fulfilled" && result.value.ok);
      return {
        ok,
        findings: [
          ...findings.filter((f) => f.severity === "error"),
          ...findings.filter((f) => f.severity !== "error"),
        ],
      };
    },
    // deployment settings: the home cell's
    putAlert: (name, input) => home.putAlert(name, input),
    alerts: () => home.alerts(),
    deleteAlert: (name) => home.deleteAlert(name),
    checkAlerts: (checkOptions) => home.checkAlerts(checkOptions),
    createToken: (input) => home.createToken(input),
    listTokens: () => home.listTokens(),
    revokeToken: (id) => home.revokeToken(id),
    verifyToken: (secret) => home.verifyToken(secret),
    retention: () => home.retention(),
    // a stored policy is in force in every cell (each removes its own events)
    async setRetention(policy) {
      const [first] = await everyCell((corq) => corq.setRetention(policy));
      return present(first, "the home cell's retention");
    },
    async runRetention(runOptions) {
      const runs = await everyCell((corq) => corq.runRetention(runOptions));
      return {
        deleted: sum(runs.map((run) => run.deleted)),
        horizon: runs[0]?.horizon ?? null,
        done: runs.every((run) => run.done),
      };
    },
    // the runtimes' machinery: serve runs one runner per cell on the cells' own runtimes; the
    // Worker's dispatch over cells claims slots per cell, not through this
    async claimSlots() {
      throw new CorqError("invalid_input", "consumer slots are per cell: each cell's runner (serve) claims its own");
    },
    async kick() {
      throw new CorqError("invalid_input", "consumer slots are per cell: each cell's runner (serve) claims its own");
    },
    async releaseSlot() {
      throw new CorqError("invalid_input", "consumer slots are per cell: each cell's runner (serve) releases its own");
    },
    async horizonWaiting(tx) {
      // a transaction id is one cell's: without one, whether any cell has events waiting
      if (tx !== undefined) throw new CorqError("invalid_input", "a transaction id is one cell's");
      return (await everyCell((corq) => corq.horizonWaiting())).some(Boolean);
    },
    async readyKeys(cap) {
      // GET /health: the home cell must answer (the directory is there); a cell that is down is
      // left out of the counts (GET /doctor names it)
      const settled = await settle((corq) => corq.readyKeys(cap));
      if (settled[0]?.result.status === "rejected") throw inCell(settled[0].name, settled[0].result.reason);
      const total: Awaited<ReturnType<CorqRuntime["readyKeys"]>> = {};
      for (const { result } of settled)
        if (result.status === "fulfilled")
          for (const [name, ready] of Object.entries(result.value))
            total[name] = { kind: ready.kind, ready: (total[name]?.ready ?? 0) + ready.ready };
      return total;
    },
    async housekeeping(housekeepingOptions) {
      const passes = await everyCell((corq) => corq.housekeeping(housekeepingOptions));
      const total = { keys: 0, busySubscriptions: 0, activity: 0, sessions: 0, webhookIds: 0, idempotencyKeys: 0 };
      for (const pass of passes)
        for (const field of Object.keys(total) as (keyof typeof total)[]) total[field] += pass[field];
      return total;
    },
    database: () => home.database(),
    close: () => cells.close(),
  };
  return runtime;
}

/**
 * One subscription over the cells: the home cell's configuration (every cell has the same: puts
 * go to every cell), with what is counted summed, and the oldest pending event of any cell.
 */
export function mergeSubscriptions(perCell: SubscriptionStats[]): SubscriptionStats {
  const first = present(perCell[0], "a subscription's stats");
  const total = (value: (s: SubscriptionStats) => number) => sum(perCell.map(value));
  const keys = Object.fromEntries(
    Object.entries(first.keys).map(([state, n]) => [
      state,
      typeof n === "number" ? total((s) => s.keys[state as keyof typeof s.keys] as number) : n,
    ]),
  ) as SubscriptionStats["keys"];
  const waitingUntil = perCell
    .map((s) => s.keys.waitingUntil)
    .filter((at): at is string => at !== null)
    .sort()[0];
  const ages = perCell.map((s) => s.oldestPendingAgeMs).filter((age): age is number => age !== null);
  return {
    ...first,
    lag: total((s) => s.lag),
    lagEstimated: perCell.some((s) => s.lagEstimated),
    pending: total((s) => s.pending),
    skipped: total((s) => s.skipped),
    skippedInvalidKeys: total((s) => s.skippedInvalidKeys),
    skippedDeadLetters: total((s) => s.skippedDeadLetters),
    tenantMismatched: total((s) => s.tenantMismatched),
    paused: perCell.some((s) => s.paused),
    advanceError: perCell.find((s) => s.advanceError !== null)?.advanceError ?? null,
    keys: { ...keys, waitingUntil: waitingUntil ?? null },
    oldestPendingAgeMs: ages.length > 0 ? Math.max(...ages) : null,
  };
}

/**
 * Prometheus texts of several cells as one: each family's HELP and TYPE once, then every cell's
 * samples of it with `cell="<name>"` added to their labels.
 */
export function labelledByCell(names: string[], texts: string[]): string {
  const families = new Map<string, { header: string[]; samples: string[] }>();
  texts.forEach((text, index) => {
    const label = `cell="${present(names[index], "a cell's name")}"`;
    let family: { header: string[]; samples: string[] } | undefined;
    for (const line of text.split("\n")) {
      if (line === "") continue;
      const help = /^# HELP (\S+)/.exec(line);
      if (help) {
        const name = present(help[1], "the family's name");
        family = families.get(name) ?? { header: [], samples: [] };
        if (!families.has(name)) families.set(name, family);
        if (family.header.length < 2) family.header.push(line);
        continue;
      }
      if (line.startsWith("#")) {
        if (family && family.header.length < 2) family.header.push(line);
        continue;
      }
      const labelled = line.replace(/^([^\s{]+)(?:\{(.*)\})? /, (_, metric: string, labels?: string) =>
        labels ? `${metric}{${label},${labels}} ` : `${metric}{${label}} `,
      );
      family?.samples.push(labelled);
    }
  });
  return `${[...families.values()].flatMap((f) => [...f.header, ...f.samples]).join("\n")}\n`;
}

/** Of a key's states in every cell, the one of the cell that holds its events (the highest seq). */
function mostOf(states: KeyState[]): KeyState {
  return present(
    states.reduce<KeyState | undefined>((best, state) => (best && best.seq >= state.seq ? best : state), undefined),
    "a key's state",
  );
}

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));
