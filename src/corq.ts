// createCorq: the parts under src/corq/, each owning a stage (its statements, its options, its
// decoding), wired here over one connection, one batch recorder and one push transport.
import { createBatchRecorder } from "./batchRecorder.js";
import { createPushTransport, registerPushTransport } from "./pushTransport.js";
import { recordBatches } from "./sql/activity/activity.js";
import type { AnyEvents, Corq, CorqOptions, EventMap } from "./types.js";
import type { CorqRuntime } from "./runtimeTypes.js";
import { createAdvancing } from "./corq/advancing.js";
import { createAlerts } from "./corq/alerts.js";
import { createWakes } from "./corq/wakes.js";
import { connect } from "./corq/connect.js";
import { createConsuming } from "./corq/consuming.js";
import { createDispatching } from "./corq/dispatching.js";
import { createHousekeeping } from "./corq/housekeeping.js";
import { createInspection } from "./corq/inspection.js";
import { createLog } from "./corq/log.js";
import { createOperations } from "./corq/operations.js";
import { createRetention } from "./corq/retention.js";
import { parseCorqOptions } from "./corq/options.js";
import { createSubscriptions } from "./corq/subscriptions.js";
import { createTokens } from "./corq/tokens.js";

export { DEFAULT_KEYS_PER_CLAIM, MAX_KEYS_PER_CLAIM } from "./corq/consuming.js";

/**
 * The library: corq on a database, as users call it (src/index.ts). `createCorq<Events>(…)`
 * checks subscriptions and appends against the app's event map (docs/typed-events.md).
 */
export function createCorq<E extends EventMap = AnyEvents>(options: NoInfer<CorqOptions<E>>): Corq<E>;
export function createCorq(options: CorqOptions): Corq {
  return createCorqRuntime(options);
}

/** The same, with what the runtimes drive (consumer slots, kicks, the horizon probe): src/internal.ts. */
export function createCorqRuntime(options: CorqOptions): CorqRuntime {
  const settings = parseCorqOptions(options);
  const { executor, end } = connect(options, settings.statementOptions);
  const deps = { executor, settings };
  const recorder = createBatchRecorder(async (records) => (await executor()).run(recordBatches(records)), {
    holdMs: settings.activityFlushMs,
  });
  const wakes = createWakes(executor, "append");
  const readyWakes = createWakes(executor, "ready");
  const pushTransport = createPushTransport({ allowPrivate: settings.pushAllowPrivate });
  const subscriptions = createSubscriptions(deps);
  const advancing = createAdvancing({ ...deps, ready: readyWakes.wake });
  const inspection = createInspection({ ...deps, subscription: subscriptions.subscription });
  const corq: CorqRuntime = {
    ...createLog({ ...deps, wake: wakes.wake, advance: advancing.advance }),
    ...subscriptions,
    ...advancing,
    ...createConsuming({ ...deps, recorder, corq: () => corq }),
    ...createDispatching(deps),
    ...createHousekeeping(deps),
    ...inspection,
    ...createOperations({
      ...deps,
      subscription: subscriptions.subscription,
      key: inspection.key,
      advance: advancing.advance,
    }),
    ...createTokens(deps),
    ...createRetention(deps),
    ...createAlerts({ ...deps, transport: pushTransport }),
    database: executor,
    async close() {
      await wakes.settled();
      await readyWakes.settled();
      await recorder.close();
      await end();
      await pushTransport.close();
    },
  };
  registerPushTransport(corq, pushTransport);
  return corq;
}
