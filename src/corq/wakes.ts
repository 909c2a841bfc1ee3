import type { Executor } from "../db/executor.js";
import { notifyWake, type WakePayload } from "../sql/log/notify.js";

export interface Wakes {
  /** What it is for happened (an append committed, an advance enqueued): NOTIFY the listeners (CorqOptions.notify). */
  wake(): void;
  /** The NOTIFY in flight, if any (close() waits for it). */
  settled(): Promise<void> | undefined;
}

/**
 * NOTIFY `payload` for listeners — after an append's commit ("append"), after an advance() that
 * enqueued ("ready") — coalesced: one in flight, one more after it (CorqOptions.notify).
 */
export function createWakes(executor: () => Promise<Executor>, payload: WakePayload): Wakes {
  let waking: Promise<void> | undefined;
  let wakeAgain = false;
  const wake = () => {
    if (waking) {
      wakeAgain = true;
      return;
    }
    waking = (async () => {
      do {
        wakeAgain = false;
        // a hint: a lost one costs latency only (listeners re-check on their safety net). Once
        // more on failure: after a database restart the pool's idle connections are dead, and
        // the first statement on one fails (the pool then drops it; the second gets a new one)
        const send = async () => {
          await (await executor()).run(notifyWake(payload));
        };
        await send()
          .catch(send)
          .catch(() => undefined);
      } while (wakeAgain);
    })().finally(() => {
      waking = undefined;
    });
  };
  return { wake, settled: () => waking };
}
