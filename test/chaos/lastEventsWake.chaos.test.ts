// The last events of a burst reach serve's push subscription at once, not at its safety net. With
// every backend terminated at random and a library beside serve that advances every 2 ms (so
// that serve's coalesced advances often find it at work), the last events appended — nothing
// after them to wake serve again — reach the push subscription only at serve's safety net
// (set to 20 s here, 5 s by default), while the library's code subscription got them at once —
// until the library's advance() (notify: true) told serve what it enqueued ("ready",
// src/corq/advancing.ts). Seen on a7f55bf: 12 events appended at +19.8–19.9 s pushed 20.0 s late
// (attempt 1, no duplicate). Same load and check as faults.chaos.test.ts.
import { describe, expect, inject, it } from "vitest";
import { chaosSeed, seededRandom, watchScenario } from "../helpers/chaos.js";
import { createTestDatabase } from "../helpers/database.js";
import { runFaultLoad, terminateBackends } from "../helpers/faultLoad.js";
import {
  checkFaults,
  DURATION_MS,
  load,
  secrets,
  TIMEOUT_MS,
  useCleanups,
  watchedServe,
} from "../helpers/faultScenario.js";

const cleanups = useCleanups();

describe("the last events of a burst (issue 48)", () => {
  it(
    "every backend terminated at random, a library advancing every 2 ms beside serve: the last events reach the push subscription within the bound, not at serve's safety net",
    async () => {
      const seed = chaosSeed(20261207);
      const scenario = "faults: the last events, serve + a busy library advancer";
      const watch = watchScenario(scenario, { seed, testTimeoutMs: TIMEOUT_MS });
      const serverUrl = inject("postgresUrl");
      const database = await createTestDatabase(serverUrl);
      cleanups.push(database.drop);
      const served = await watchedServe(database.url, watch, cleanups, { CORQ_SAFETY_NET_MS: "20000" });
      const random = seededRandom(seed);
      const counts = { rounds: 0, backends: 0, at: [] as number[] };
      const figures = await runFaultLoad({
        ...load,
        libraryAdvanceEveryMs: 2,
        api: { url: served.serve.url, adminToken: secrets.CORQ_ADMIN_TOKEN },
        databaseUrl: database.url,
        random,
        durationMs: DURATION_MS,
        faults: terminateBackends({
          serverUrl,
          databaseName: new URL(database.url).pathname.slice(1),
          random,
          minMs: 200,
          maxMs: 2000,
          counts,
        }),
        step: watch.step,
      });
      const exitedEarly = served.exitedEarly();
      const stopped = await served.stop();
      checkFaults(scenario, watch, figures, {
        exits: exitedEarly === undefined ? 0 : 1,
        log: served.log(figures.startedAt),
        notes: {
          seed,
          terminations: counts.rounds,
          terminated_at_ms: counts.at.map((t) => t - figures.startedAt).join(","),
        },
      });
      expect(stopped).toBe(0);
    },
    TIMEOUT_MS,
  );
});
