// Scenario 2, crash mid-batch: consumer processes are killed with SIGKILL while they handle
// batches, many times, while events are appended. After each lease expires the batch comes
// again, in order. Duplicates are counted, and each must follow a crash.
import { spawn, type ChildProcess } from "node:child_process";
import { describe, expect, it } from "vitest";
import { useCorq } from "../helpers/corq.js";
import {
  appendWhileKilling,
  chaosSeed,
  killFigures,
  reportScenario,
  seededRandom,
  tally,
  watchScenario,
} from "../helpers/chaos.js";

const open = useCorq();
const scale = Number(process.env.CORQ_CHAOS_SCALE ?? 1);
const EVENTS = 1200 * scale;
const KILLS = 16 * scale;
const CONSUMERS = 3;
const LEASE_MS = 1500;
const KEYS_PER_CLAIM = [1, 4, 8];
const TIMEOUT_MS = 120_000 * scale;

describe("crash mid-batch", () => {
  it(
    "SIGKILLed consumers lose nothing: their batches come again in order after the lease, duplicates only follow a crash",
    async () => {
      const seed = chaosSeed(20261130);
      const watch = watchScenario("crash mid-batch", { seed, testTimeoutMs: TIMEOUT_MS });
      const { corq, url, raw } = await open({
        subscriptions: [{ name: "chaos", batchSize: 5, leaseMs: LEASE_MS, maxAttempts: 1000, handle: () => undefined }],
      });
      await corq.advance(); // registers the subscription
      await raw.query(`CREATE TABLE chaos_handled (id bigserial PRIMARY KEY, pid int NOT NULL, key text NOT NULL,
      position bigint NOT NULL, started_at timestamptz NOT NULL, finished_at timestamptz NOT NULL)`);

      const children = new Set<ChildProcess>();
      let appended = 0;
      let stopping = false;
      const killed = new Set<number>();
      let started = 0;
      const startConsumer = () => {
        // one key per claim, and several (their handlers at once, settled together), side by side
        const keysPerClaim = KEYS_PER_CLAIM[started++ % KEYS_PER_CLAIM.length];
        const child = spawn(process.execPath, ["--import", "tsx", "test/chaos/consumerProcess.ts"], {
          env: {
            ...process.env,
            DATABASE_URL: url,
            CORQ_CHAOS_LEASE_MS: String(LEASE_MS),
            CORQ_CHAOS_KEYS_PER_CLAIM: String(keysPerClaim),
          },
          stdio: ["ignore", "inherit", "inherit"],
        });
        children.add(child);
        // a consumer ends only by the test's SIGKILL
        watch.watchChild(child, "a consumer", () => stopping || killed.has(child.pid!));
        child.once("exit", () => children.delete(child));
      };
      try {
        for (let i = 0; i < CONSUMERS; i++) startConsumer();
        watch.step("appending while consumers are killed");

        // appends and kills at once: appending goes on (at least EVENTS) until the last kill
        appended = await appendWhileKilling({
          random: seededRandom(seed),
          append: (stream, batch) =>
            corq.append(stream, batch).catch((error: Error) => {
              watch.fail(`an append to ${stream} failed: ${error.message}`);
              throw error;
            }),
          eventName: "Step",
          streams: Array.from({ length: 40 }, (_, i) => `order-${i}`),
          events: EVENTS,
          kills: KILLS,
          children,
          kill: (victim) => {
            killed.add(victim.pid!);
            victim.kill("SIGKILL");
            startConsumer();
          },
        });

        // the survivors (and the replacements) finish everything, the killed leases included
        watch.step(`waiting for all ${appended} events to be handled`);
        await watch.waitFor(
          `all ${appended} events handled`,
          async () => {
            const { rows } = await raw.query("SELECT count(DISTINCT position)::int AS n FROM chaos_handled");
            expect(rows[0].n).toBe(appended);
          },
          { timeoutMs: 90_000, intervalMs: 250 },
        );
      } finally {
        stopping = true;
        for (const child of children) child.kill("SIGKILL");
      }

      // the truth: every event per stream in log order
      const { rows: events } = await raw.query("SELECT stream, position FROM corq.events ORDER BY tx, position");
      const expected = new Map<string, number[]>();
      for (const e of events) expected.set(e.stream, [...(expected.get(e.stream) ?? []), Number(e.position)]);
      const { rows: handled } = await raw.query(
        "SELECT pid, key, position::int, started_at, finished_at FROM chaos_handled ORDER BY id",
      );
      const figures = tally(expected, handled);

      // a duplicate follows a crash; never two holders of one key at once
      const { doubleClaims, dupWithoutCrash } = killFigures(handled, killed);

      // said now, before the assertions below (a run cut during the teardown still shows it)
      watch.expectZero({
        lost: figures.lost,
        order: figures.order,
        double_claims: doubleClaims,
        dup_without_crash: dupWithoutCrash,
      });
      watch.expectEqual("events checked vs appended", figures.events, appended);
      watch.expectEqual("kills", killed.size, KILLS);
      reportScenario({
        scenario: "crash mid-batch (SIGKILL)",
        ...figures,
        doubleClaims,
        notes: {
          kills: killed.size,
          consumers: CONSUMERS,
          keys_per_claim: KEYS_PER_CLAIM.join("/"),
          dup_without_crash: dupWithoutCrash,
          seed,
        },
      });
      expect(figures).toMatchObject({ events: appended, lost: 0, order: 0 });
      expect(doubleClaims).toBe(0);
      expect(dupWithoutCrash).toBe(0);
      expect(killed.size).toBe(KILLS);
      const left = await corq.subscription("chaos");
      watch.expectEqual(
        "pending and dead keys left",
        { pending: left.pending, dead: left.keys.dead },
        { pending: 0, dead: 0 },
      );
      expect(left).toMatchObject({ pending: 0, keys: { dead: 0 } });
    },
    TIMEOUT_MS,
  );
});
