// Issue 48's fault suite on Workers: every backend terminated at random while appends and push
// deliveries flow through the Worker (workerd, the Neon driver through the local HTTP SQL
// endpoint and WebSocket proxy, a cron every 500 ms) and the library appends and consumes a code
// subscription beside it: nothing lost or delivered out of order, no HTTP 500, and no event waits
// for a lease (test/helpers/faultScenario.ts: the bound; test/helpers/faultLoad.ts: the load).
import { describe, expect, inject, it } from "vitest";
import { startLocalStack } from "../../cli/dev/localStack.js";
import { chaosSeed, seededRandom, watchScenario } from "../helpers/chaos.js";
import { createTestDatabase } from "../helpers/database.js";
import { runFaultLoad } from "../helpers/faultLoad.js";
import {
  checkFaults,
  DURATION_MS,
  everyBackendEnded,
  load,
  secrets,
  TIMEOUT_MS,
  useCleanups,
} from "../helpers/faultScenario.js";

const cleanups = useCleanups();

describe("connection faults on Workers (issue 48)", () => {
  it(
    "every backend terminated at random while the Worker (workerd) and the library append and deliver: nothing lost or reordered, no event late by a lease",
    async () => {
      const seed = chaosSeed(20261208);
      const scenario = "faults: terminations, Worker + library";
      const watch = watchScenario(scenario, { seed, testTimeoutMs: TIMEOUT_MS });
      const serverUrl = inject("postgresUrl");
      const database = await createTestDatabase(serverUrl);
      cleanups.push(database.drop);
      const workerLog: { at: number; line: string }[] = [];
      const stack = await startLocalStack({
        databaseUrl: database.url,
        logLevel: "warn",
        log: (line) => workerLog.push({ at: Date.now(), line }),
        cronIntervalMs: 500,
        adminToken: secrets.CORQ_ADMIN_TOKEN,
        vars: { CORQ_LOCAL: "true" },
      });
      cleanups.push(() => stack.stop());
      const random = seededRandom(seed);
      const counts = { rounds: 0, backends: 0, at: [] as number[] };
      const figures = await runFaultLoad({
        ...load,
        api: { url: stack.url, adminToken: stack.adminToken },
        databaseUrl: database.url,
        random,
        durationMs: DURATION_MS,
        faults: everyBackendEnded(serverUrl, database.url, random, counts),
        step: watch.step,
      });
      if (workerLog.length > 0)
        console.log(
          `the Worker's log (ms after the load began):\n${workerLog
            .slice(-40)
            .map((l) => `+${l.at - figures.startedAt} ${l.line}`)
            .join("\n")}`,
        );
      checkFaults(scenario, watch, figures, {
        exits: 0, // workerd is not ours to watch: a Worker that threw answers 500 (counted)
        notes: {
          seed,
          terminations: counts.rounds,
          backends_ended: counts.backends,
          terminated_at_ms: counts.at.map((t) => t - figures.startedAt).join(","),
        },
      });
      expect(counts.rounds).toBeGreaterThan(3);
    },
    TIMEOUT_MS,
  );
});
