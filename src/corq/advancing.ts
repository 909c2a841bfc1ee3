// The advance: the log into the subscriptions' queues (src/advance.ts).
import { advanceOnce } from "../advance.js";
import type { Corq } from "../types.js";
import type { PartDeps } from "./options.js";

export function createAdvancing({
  executor,
  settings,
  ready,
}: PartDeps & { ready: () => void }): Pick<Corq, "advance"> {
  return {
    async advance(advanceOpts = {}) {
      const first = await advanceOnce(await executor(), settings.code, {
        batchSize: settings.advanceBatchSize,
        coalesce: advanceOpts.coalesce === true,
        eventNames: advanceOpts.eventNames,
      });
      if (advanceOpts.coalesce !== true || (advanceOpts.recheckIf?.() ?? true)) await first.recheck();
      // What this advance enqueued may be for a serve process to deliver — a push subscription's
      // events, or serve's own appends whose advance found this one at work and left them to it:
      // with `notify`, the listeners are told keys are ready, unless the caller delivers what it
      // enqueues itself (serve's runner).
      if (settings.notify && advanceOpts.consumesEnqueued !== true && Object.values(first.advanced).some((n) => n > 0))
        ready();
      return first.advanced;
    },
  };
}
