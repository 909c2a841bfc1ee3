// The advance: the log into the subscriptions' queues (src/advance.ts).
import { advanceOnce } from "../advance.js";
import type { Corq } from "../types.js";
import type { PartDeps } from "./options.js";

export function createAdvancing({ executor, settings }: PartDeps): Pick<Corq, "advance"> {
  return {
    async advance(advanceOpts = {}) {
      const first = await advanceOnce(await executor(), settings.code, {
        batchSize: settings.advanceBatchSize,
        coalesce: advanceOpts.coalesce === true,
        eventNames: advanceOpts.eventNames,
      });
      if (advanceOpts.coalesce !== true || (advanceOpts.recheckIf?.() ?? true)) await first.recheck();
      return first.advanced;
    },
  };
}
