import type { Executor } from "../db/executor.js";
import { notifyWake, type WakePayload } from "../sql/log/notify.js";

export interface AppendWakes {
  /** An append committed (or an advance enqueued: `payload`): NOTIFY the listeners (CorqOptions.notify). */
  wake(): void;
  /** The NOTIFY in flight, if any (close() waits for it). */
  settled(): Promise<void> | undefined;
}

/**
 * NOTIFY after an append's commit ("append"), or after an advance() that enqueued ("ready"),
 * coalesced: one in flight, one more after it (CorqOptions.notify).
 */
export function createAppendWakes(executor: () => Promise<Executor>, payload: WakePayload = "append"): AppendWakes {
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
