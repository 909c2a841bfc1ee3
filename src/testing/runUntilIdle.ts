// Drives a corq on a test database until there is nothing left to do, as the cron and the
// consumers would, but one batch at a time and in one process: deterministic, and bounded.
//
// A round: advance (the log into the queues, including what the last round's handlers appended),
// then consume every subscription until it has nothing ready. Idle: a round that consumed nothing
// and after which every subscription has no lag, no ready key and no leased key — and, with
// `waitForBackoff`, no key in backoff (else those are reported in `waiting`). Paused subscriptions
// and paused or dead keys count as idle: nothing will run them. A round that consumed nothing but
// is not idle waits a little (a backoff's end, another consumer's lease) and goes again, until
// `maxBatches` batches ran or `timeoutMs` passed: then it throws, naming what is still pending.
import type { ConsumeResult, Corq, DeadLetter, SubscriptionStats } from "../types.js";

export interface RunUntilIdleOptions {
  /** Subscriptions to run (default: every one this corq defines, and the push subscriptions). */
  subscriptions?: string[];
  /** Wait for keys in backoff to run again (default false: they are reported in `waiting`). */
  waitForBackoff?: boolean;
  /** Throw once this many batches ran and it is still not idle (default 1,000). */
  maxBatches?: number;
  /** Throw once this much time passed and it is still not idle (default 10,000 ms). */
  timeoutMs?: number;
}

/** One batch consumed: ConsumeResult, with its subscription. */
export interface HandledBatch extends ConsumeResult {
  subscription: string;
}

export interface IdleReport {
  /** Every batch consumed, in the order they ran. */
  batches: HandledBatch[];
  /** The batches that did not ack: outcome "retry", "dead" or "expired". */
  failures: HandledBatch[];
  /** The dead keys of these subscriptions now (including ones dead before this run). */
  deadLetters: DeadLetter[];
  /** Keys left in backoff (without `waitForBackoff`): they run again at `availableAt`. */
  waiting: {
    subscription: string;
    key: string;
    availableAt: string | null;
    attempts: number;
    lastError: string | null;
  }[];
  /** Rounds run (advance, then consume until nothing is ready). */
  rounds: number;
}

export async function runUntilIdle(corq: Corq, options: RunUntilIdleOptions = {}): Promise<IdleReport> {
  const maxBatches = options.maxBatches ?? 1000;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const deadline = Date.now() + timeoutMs;
  const batches: HandledBatch[] = [];
  let rounds = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  // a handler that never returns must not hang the test: the bound holds around every await
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new NotIdle(`still running after ${timeoutMs} ms (timeoutMs)`)), timeoutMs);
  });
  const bounded = <T>(promise: Promise<T>) => Promise.race([promise, timedOut]);
  try {
    for (;;) {
      rounds++;
      await bounded(corq.advance());
      // not the orphaned ones (code subscriptions another instance defined): this corq has no
      // handler for them, and consuming one would fail its batches
      const names =
        options.subscriptions ??
        (await bounded(corq.stats())).subscriptions.filter((s) => !s.orphaned).map((s) => s.name);
      let consumed = 0;
      for (const name of names) {
        for (;;) {
          const result = await bounded(corq.consume(name));
          if (result === null) break;
          batches.push({ subscription: name, ...result });
          consumed++;
          if (batches.length >= maxBatches) throw new NotIdle(`${batches.length} batches ran (maxBatches)`);
          if (Date.now() > deadline) throw new NotIdle(`still running after ${timeoutMs} ms (timeoutMs)`);
        }
      }
      if (consumed > 0) continue; // handlers may have appended: advance again
      const stats = (await bounded(corq.stats())).subscriptions.filter((s) => names.includes(s.name) && !s.paused);
      const busy = stats.filter((s) => s.lag > 0 || s.keys.ready > 0 || s.keys.leased > 0);
      const backoff = stats.filter((s) => s.keys.backoff > 0);
      if (busy.length === 0 && (backoff.length === 0 || !options.waitForBackoff)) {
        const waiting = (
          await bounded(Promise.all(backoff.map((s) => corq.keys(s.name, { status: "backoff", limit: 1000 }))))
        ).flatMap((keys, index) =>
          keys.map(({ key, availableAt, attempts, lastError }) => ({
            subscription: (backoff[index] as SubscriptionStats).name,
            key,
            availableAt,
            attempts,
            lastError,
          })),
        );
        const deadLetters = (
          await bounded(Promise.all(stats.map((s) => corq.deadLetters({ subscription: s.name, limit: 1000 }))))
        ).flat();
        const failures = batches.filter((batch) => batch.outcome !== "acked");
        return { batches, failures, deadLetters, waiting, rounds };
      }
      if (Date.now() > deadline) throw new NotIdle(`still running after ${timeoutMs} ms (timeoutMs)`);
      // nothing ran but something will: a backoff ending, a lease held elsewhere, a transaction
      // holding the horizon. Poll: the database's clock decides, not ours.
      await bounded(new Promise((resolve) => setTimeout(resolve, 10)));
    }
  } catch (error) {
    if (!(error instanceof NotIdle)) throw error;
    throw new Error(`runUntilIdle: not idle — ${error.message}.${await describePending(corq, batches)}`, {
      cause: error,
    });
  } finally {
    clearTimeout(timer);
  }
}

/** The bound was hit (maxBatches, timeoutMs): said, with what is still pending. */
class NotIdle extends Error {}

/** What is still pending per subscription, with its keys and the keys that ran most. */
async function describePending(corq: Corq, batches: HandledBatch[]): Promise<string> {
  const lines: string[] = [];
  const counts = new Map<string, number>();
  for (const { subscription, key } of batches) {
    const id = `${subscription} / ${key}`;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  const most = [...counts].sort((a, b) => b[1] - a[1]).slice(0, 3);
  if (most.length > 0) lines.push(`most batches: ${most.map(([id, n]) => `${id} ×${n}`).join(", ")}`);
  try {
    const stats = await withTimeout(corq.stats(), 2000);
    for (const s of stats.subscriptions) {
      const { ready, leased, backoff } = s.keys;
      if (s.lag === 0 && ready + leased + backoff === 0) continue;
      const keys = await withTimeout(corq.keys(s.name, { limit: 5 }), 2000);
      const busy = keys.filter((k) => k.status !== "idle" && k.status !== "dead" && k.status !== "paused");
      lines.push(
        `"${s.name}": lag ${s.lag}, ready ${ready}, leased ${leased}, backoff ${backoff}` +
          busy.map((k) => `\n    key "${k.key}" ${k.status}, ${k.pending} pending: ${k.reason}`).join(""),
      );
    }
  } catch (error) {
    lines.push(`(could not read what is pending: ${String(error)})`);
  }
  return lines.map((line) => `\n  ${line}`).join("");
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
