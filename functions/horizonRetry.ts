// An append's events can commit while an older transaction still runs (a consumer's ack, an
// advance, another client's transaction — in any database of the cluster: the xmin horizon is
// the cluster's). Then the append's kick cannot advance them (docs/architecture.md, invariant
// 1), and nothing wakes anyone when that transaction ends: on Node the runner retries; here only
// the cron would, up to a minute later. So a kick whose slot claim saw events waiting above the
// horizon starts one more invocation of this Worker (one subrequest), which waits for the
// horizon to pass — polling with backoff, a few seconds at most — and kicks again. One at a time
// per isolate, and a retry starts no retry of its own: a transaction held open for minutes costs
// one such invocation per isolate, then the cron takes over.
import type { Corq } from "../src/index.js";

/** Polls after these delays (ms): about 3 s in all. */
const DELAYS_MS = [25, 50, 100, 200, 400, 800, 1600];

const inFlight = new Set<string>();

/**
 * Starts the retry invocation unless one for `scope` (one database) is in flight in this
 * isolate. Returns its response, or undefined when none was started.
 */
export function startHorizonRetry(scope: string, start: () => Promise<Response>): Promise<Response> | undefined {
  if (inFlight.has(scope)) return undefined;
  inFlight.add(scope);
  return start().finally(() => inFlight.delete(scope));
}

/** Waits until no committed event waits above the horizon; false when it still does after the last poll. */
export async function waitForHorizon(
  corq: Pick<Corq, "horizonWaiting">,
  sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms)),
): Promise<boolean> {
  for (const delay of DELAYS_MS) {
    await sleep(delay);
    if (!(await corq.horizonWaiting())) return true;
  }
  return false;
}
