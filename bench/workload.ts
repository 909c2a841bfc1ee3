// The shared workload: N events over K correlation keys, each key owned by one producer so
// that its events are appended in sequence (seq 0, 1, 2 … per key). Every system's handler
// reports (key, seq); OrderCheck counts what came out of order.

export interface Item {
  key: string;
  seq: number;
}

/** The items of producer `p`: event i goes to key i % K (seq ⌊i / K⌋); key k belongs to producer k % P. */
export function producerItems(p: number, producers: number, events: number, keys: number): Item[] {
  const items: Item[] = [];
  for (let i = 0; i < events; i++) {
    const k = i % keys;
    if (k % producers === p) items.push({ key: `k${k}`, seq: Math.floor(i / keys) });
  }
  return items;
}

export function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Counts handled items and per-key order violations (a seq lower than one already seen). */
export class OrderCheck {
  private last = new Map<string, number>();
  private seen = new Set<string>();
  handled = 0;
  duplicates = 0;
  violations = 0;

  record(item: Item) {
    const id = `${item.key}#${item.seq}`;
    if (this.seen.has(id)) {
      this.duplicates++;
      return;
    }
    this.seen.add(id);
    this.handled++;
    const last = this.last.get(item.key) ?? -1;
    if (item.seq < last) this.violations++;
    else this.last.set(item.key, item.seq);
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * An in-process wake-up: what an append's kick and the dispatcher are on Workers. Waiters
 * sleep until notified or `ms` pass (the fallback poll, like the cron).
 */
export class Wakeup {
  private waiters: (() => void)[] = [];
  /** Wakes every waiter, or the `count` that waited longest. */
  notify(count = Number.POSITIVE_INFINITY) {
    for (const wake of this.waiters.splice(0, count)) wake();
  }
  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve();
      };
      // a waiter that timed out leaves the line: a notify(count) must reach waiters still waiting
      const timer = setTimeout(() => {
        const at = this.waiters.indexOf(wake);
        if (at >= 0) this.waiters.splice(at, 1);
        resolve();
      }, ms);
      this.waiters.push(wake);
    });
  }
}

/**
 * The runtimes' advancer: advance; when that queued something, wake consumers (`wake(n)`: how
 * many of them for n queued events; all by default), else wait for an append's notify or 50 ms.
 * Until `done()`.
 */
export async function advancerLoop(
  advance: () => Promise<Record<string, number>>,
  signals: { appended: Wakeup; enqueued: Wakeup },
  done: () => boolean,
  wake: (enqueued: number) => number = () => Number.POSITIVE_INFINITY,
): Promise<void> {
  while (!done()) {
    const enqueued = Object.values(await advance()).reduce((sum, n) => sum + n, 0);
    if (enqueued > 0) signals.enqueued.notify(wake(enqueued));
    else await signals.appended.wait(50);
  }
}
