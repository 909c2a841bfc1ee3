// An append's events can commit while an older transaction still runs (a consumer's ack, an
// advance, another client's transaction — in any database of the cluster: the xmin horizon is
// the cluster's). Then the append's kick cannot advance them (docs/architecture.md, invariant
// 1), and nothing wakes anyone when that transaction ends: on Node the runner retries; here only
// the cron would, up to a minute later. So a kick whose slot claim saw events waiting above the
// horizon starts one more invocation of this Worker (one subrequest), which waits for the
// horizon to pass THAT kick's newest waiting transaction — polling with backoff, a few seconds at
// most — and kicks again. One at a time per isolate, and a retry starts no retry of its own.
// Under steady appends a kick often sees events of concurrent appends waiting: their retry ends
// as soon as those transactions do (milliseconds), and the next kick may start another.
import type { CorqRuntime } from "../internal.js";

/** Polls after these delays (ms): about 3 s in all. */
const DELAYS_MS = [25, 50, 100, 200, 400, 800, 1600];

const inFlight = new Set<string>();

/**
 * Starts the retry invocation unless one for `scope` (one database and app: scopeKey) is in flight in this
 * isolate. Returns its response, or undefined when none was started.
 */
export function startHorizonRetry(scope: string, start: () => Promise<Response>): Promise<Response> | undefined {
  if (inFlight.has(scope)) return undefined;
  inFlight.add(scope);
  // (a start that throws at once must not leave the scope taken)
  return Promise.resolve()
    .then(start)
    .finally(() => inFlight.delete(scope));
}

/**
 * Waits until the horizon has passed transaction `tx` (the newest event the kick saw waiting:
 * newer appends do not hold this back); false when it still has not after the last poll.
 */
export async function waitForHorizon(
  corq: Pick<CorqRuntime, "horizonWaiting">,
  tx: string,
  sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms)),
): Promise<boolean> {
  for (const delay of DELAYS_MS) {
    await sleep(delay);
    if (!(await corq.horizonWaiting(tx))) return true;
  }
  return false;
}
