// The newer order-keeping peers of the end-to-end table (issue 34): DBOS partitioned queues and
// pg-boss group concurrency. Each runs on the fresh database it is given; a peer that does not
// load (its package failed to install: it is optional in bench/package.json) or fails, hangs or
// throws in the background while it runs gives a row that says so, and the bench goes on.
export const peerNames = ["dbos", "pgboss-group"] as const;
export type PeerName = (typeof peerNames)[number];

export interface PeerWorkload {
  events: number;
  keys: number;
}

interface PeerResult {
  eps: number;
  handled: number;
  complete: boolean;
  violations: number;
  duplicates: number;
  /** statements the peer sent per handled event, where counted (DBOS) */
  statementsPerEvent?: number;
}

export interface PeerRun {
  name: PeerName;
  /** the table's system column: mode, concurrency, batching, polling */
  label: string;
  workload: PeerWorkload;
  result?: PeerResult;
  error?: string;
}

const consumers = 8;
const enqueueBatch = 100;
const dbosPollingMs = 10;
const bossPollingSeconds = 0.5;

export const peerLabels: Record<PeerName, string> = {
  dbos: `DBOS partitioned queue (partitionConcurrency 1, workerConcurrency ${consumers}, enqueue batch ${enqueueBatch}, ${dbosPollingMs} ms polling)`,
  "pgboss-group": `pg-boss group concurrency 1 (insert, batch ${enqueueBatch}, ${consumers} workers × batch 100, ${bossPollingSeconds} s polling)`,
};

/** The workload each peer gets in `npm run bench` (a time box bounds the slow ones). */
export function peerWorkload(name: PeerName, quick: boolean): PeerWorkload {
  return name === "dbos" ? { events: quick ? 3000 : 6000, keys: 1000 } : { events: 1920, keys: 100 };
}

const timeLimitMs: Record<PeerName, number> = { dbos: 60_000, "pgboss-group": 20_000 };

async function runOne(name: PeerName, url: string, w: PeerWorkload): Promise<PeerResult> {
  if (name === "dbos") {
    const { dbosPartitioned } = await import("./systems/dbos.js");
    return dbosPartitioned(url, {
      ...w,
      consumers,
      batchSize: enqueueBatch,
      pollingIntervalMs: dbosPollingMs,
      timeLimitMs: timeLimitMs.dbos,
    });
  }
  const { pgBoss } = await import("./systems/pgBoss.js");
  return pgBoss(url, {
    ...w,
    consumers,
    batchSize: 100,
    timeLimitMs: timeLimitMs["pgboss-group"],
    pollingIntervalSeconds: bossPollingSeconds,
    mode: "group",
  });
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e)).split("\n")[0]?.slice(0, 160) ?? "";

/** Runs one peer; never throws. Errors thrown in the background while it runs are its own. */
export async function runPeer(name: PeerName, url: string, workload: PeerWorkload): Promise<PeerRun> {
  const run: PeerRun = { name, label: peerLabels[name], workload };
  let background: unknown;
  const onBackground = (e: unknown) => {
    background ??= e;
  };
  process.on("unhandledRejection", onBackground);
  process.on("uncaughtException", onBackground);
  let timer: NodeJS.Timeout | undefined;
  try {
    // the time box plus a minute for setup and shutdown: a hung peer must not hang the bench
    const hung = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("did not finish")), timeLimitMs[name] + 60_000);
    });
    run.result = await Promise.race([runOne(name, url, workload), hung]);
    if (background !== undefined) run.error = `background error: ${message(background)}`;
  } catch (e) {
    run.error = message(e);
  } finally {
    clearTimeout(timer);
    process.off("unhandledRejection", onBackground);
    process.off("uncaughtException", onBackground);
  }
  return run;
}

const fmt = (n: number) => Math.round(n).toLocaleString("en");

/** The end-to-end table's row: struck through when it broke per-key order, the failure when it failed. */
export function peerRow(run: PeerRun): string {
  const { result: r, workload: w } = run;
  if (!r) return `| ${run.label} | – | – | did not run: ${run.error} |`;
  const rate = r.violations > 0 ? `~~${fmt(r.eps)}~~ (breaks per-key order)` : fmt(r.eps);
  const unit = run.name === "dbos" ? "workflows" : "jobs";
  const note = `${fmt(r.handled)} of ${fmt(w.events)} ${unit} over ${fmt(w.keys)} keys${r.complete ? "" : ", time-boxed"}${r.duplicates ? `, ${r.duplicates} run twice` : ""}${r.statementsPerEvent ? `, ${r.statementsPerEvent.toFixed(1)} statements per event, polls and enqueues included` : ""}${run.error ? `; ${run.error}` : ""}`;
  return `| ${run.label} | ${rate} | ${r.violations} | ${note} |`;
}

/** The JSON line's fields: rate and order violations (null when the peer did not run). */
export function peerJson(run: PeerRun) {
  return { eps: run.result ? Math.round(run.result.eps) : null, violations: run.result?.violations ?? null };
}
