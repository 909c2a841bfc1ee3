// Scenario 2, crash mid-batch: consumer processes are killed with SIGKILL while they handle
// batches, many times, while events are appended. After each lease expires the batch comes
// again, in order. Duplicates are counted, and each must follow a crash.
import { spawn, type ChildProcess } from "node:child_process";
import { describe, expect, it } from "vitest";
import { useCorq } from "../helpers/corq.js";
import { appendWhileKilling, chaosSeed, killFigures, reportScenario, seededRandom, tally } from "../helpers/chaos.js";
import { eventually } from "../helpers/stack.js";

const open = useCorq();
const scale = Number(process.env.CORQ_CHAOS_SCALE ?? 1);
const EVENTS = 1200 * scale;
const KILLS = 16 * scale;
const CONSUMERS = 3;
const LEASE_MS = 1500;
const KEYS_PER_CLAIM = [1, 4, 8];

describe("crash mid-batch", () => {
  it(
    "SIGKILLed consumers lose nothing: their batches come again in order after the lease, duplicates only follow a crash",
    async () => {
      const { corq, url, raw } = await open({
        subscriptions: [{ name: "chaos", batchSize: 5, leaseMs: LEASE_MS, maxAttempts: 1000, handle: () => undefined }],
      });
      await corq.advance(); // registers the subscription
      await raw.query(`CREATE TABLE chaos_handled (id bigserial PRIMARY KEY, pid int NOT NULL, key text NOT NULL,
      position bigint NOT NULL, started_at timestamptz NOT NULL, finished_at timestamptz NOT NULL)`);

      const children = new Set<ChildProcess>();
      let appended = 0;
      const seed = chaosSeed(20261130);
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
        child.once("exit", () => children.delete(child));
      };
      try {
        for (let i = 0; i < CONSUMERS; i++) startConsumer();

        // appends and kills at once: appending goes on (at least EVENTS) until the last kill
        appended = await appendWhileKilling({
          random: seededRandom(seed),
          append: (stream, batch) => corq.append(stream, batch),
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
        await eventually(
          async () => {
            const { rows } = await raw.query("SELECT count(DISTINCT position)::int AS n FROM chaos_handled");
            expect(rows[0].n).toBe(appended);
          },
          { timeoutMs: 90_000, intervalMs: 250 },
        );
      } finally {
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
      expect(left).toMatchObject({ pending: 0, keys: { dead: 0 } });
    },
    120_000 * scale,
  );
});
