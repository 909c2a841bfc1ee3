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
      // An advance() of an app's own (not a runner's coalescing one, which consumes what it
      // enqueues) may have enqueued what a serve process is to deliver — a push subscription's
      // events, or events it appended and then found this advancer at work on (its kick was
      // served here): with `notify`, the listeners are told keys are ready.
      if (settings.notify && advanceOpts.coalesce !== true && Object.values(first.advanced).some((n) => n > 0)) ready();
      return first.advanced;
    },
  };
}
