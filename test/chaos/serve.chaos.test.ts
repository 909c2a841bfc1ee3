// The Node runtime under failure: three `serve` processes share one database while events are
// appended, and one of them is SIGKILLed (and started again) every couple of seconds — nothing
// is lost, per-key order holds, a duplicate only follows a kill; and a serve process whose
// database restarts LISTENs again and re-checks, so a wake-up sent while it was away is not lost.
import pg from "pg";
import { afterEach, describe, expect, inject, it } from "vitest";
import { startEmbeddedPostgres } from "../../cli/dev/embeddedPostgres.js";
import { createCorq } from "../../src/index.js";
import { chaosSeed, killFigures, reportScenario, seededRandom, tally, watchScenario } from "../helpers/chaos.js";
import { createTestDatabase } from "../helpers/database.js";
import { sleep } from "../helpers/corq.js";
import { startServeProcess, type ServeProcess } from "../helpers/serveProcess.js";
import { present } from "../helpers/present.js";

const scale = Number(process.env.CORQ_CHAOS_SCALE ?? 1);
const PROCESSES = 3;
const KILLS = 5 * scale;
const EVENTS = 1500 * scale;
const LEASE_MS = 1500;
const TIMEOUT_MS = 120_000 * scale;
const LISTEN_TIMEOUT_MS = 90_000; // a cluster of its own, a restart and a serve process: slow on a loaded machine

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

describe("serve under failure", () => {
  it(
    "3 serve processes, one SIGKILLed every ~2 s while appending: nothing lost, order kept, duplicates only after a kill",
    async () => {
      const seed = chaosSeed(20261202);
      const watch = watchScenario("serve: 3 processes, SIGKILL", { seed, testTimeoutMs: TIMEOUT_MS });
      const database = await createTestDatabase(inject("postgresUrl"));
      const raw = new pg.Pool({ connectionString: database.url, max: 2 });
      raw.on("error", () => undefined);
      const corq = createCorq({ databaseUrl: database.url, notify: true, poolSize: 2 });
      cleanups.push(
        database.drop,
        () => raw.end(),
        () => corq.close(),
      );
      const running = new Set<ServeProcess>();
      const killed = new Set<number>();
      let stopping = false;
      cleanups.push(() => {
        stopping = true;
        return Promise.all([...running].map((serve) => serve.stop("SIGKILL")));
      });
      const start = async () => {
        const serve = await startServeProcess({
          databaseUrl: database.url,
          entry: "test/serve/recordingServe.ts",
          env: {
            CORQ_TEST_HANDLER_MS: "3",
            CORQ_TEST_LEASE_MS: String(LEASE_MS),
            CORQ_TEST_BATCH_SIZE: "5",
            CORQ_CONCURRENCY: "4",
          },
        });
        running.add(serve);
        // a serve process ends only by the test's SIGKILL (or the teardown's)
        const pid = present(serve.child.pid, "a serve process's pid");
        void serve.exited.then((code) => {
          running.delete(serve);
          if (!stopping && !killed.has(pid))
            watch.fail(`serve process ${pid} exited unexpectedly (${code}): ${serve.output().slice(-4000)}`);
        });
      };
      await Promise.all(Array.from({ length: PROCESSES }, start));

      let appended = 0;
      let killsOver = false;
      const random = seededRandom(seed);
      watch.step("appending while serve processes are killed");
      const appending = (async () => {
        while (appended < EVENTS || !killsOver) {
          const count = 1 + Math.floor(random() * 5);
          const stream = `order-${Math.floor(random() * 40)}`;
          await corq
            .append(
              stream,
              Array.from({ length: count }, (_, i) => ({ name: "Step", data: { i: appended + i } })),
            )
            .catch((error: Error) => {
              watch.fail(`an append to ${stream} failed: ${error.message}`);
              throw error;
            });
          appended += count;
          await sleep(random() * 6);
        }
      })();
      for (let kill = 0; kill < KILLS; kill++) {
        await sleep(1500 + random() * 1000);
        const victims = [...running];
        const victim = present(victims[Math.floor(random() * victims.length)], "a running serve process to kill");
        killed.add(present(victim.child.pid, "the victim's pid"));
        await victim.stop("SIGKILL");
        await start();
      }
      killsOver = true;
      await appending;

      watch.step(`waiting for all ${appended} events to be handled`);
      await watch.waitFor(
        `all ${appended} events handled`,
        async () => {
          const { rows } = await raw.query("SELECT count(DISTINCT position)::int AS n FROM serve_handled");
          expect(rows[0].n).toBe(appended);
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );

      const { rows: events } = await raw.query("SELECT stream, position FROM corq.events ORDER BY tx, position");
      const expected = new Map<string, number[]>();
      for (const e of events) expected.set(e.stream, [...(expected.get(e.stream) ?? []), Number(e.position)]);
      const { rows: handled } = await raw.query(
        "SELECT pid, key, position::int, started_at, finished_at FROM serve_handled ORDER BY id",
      );
      const figures = tally(expected, handled);
      // a duplicate follows a kill; never two holders of one key at once
      const { doubleClaims, dupWithoutCrash } = killFigures(handled, killed);
      // said now, before the assertions below (a run cut during the teardown still shows it)
      watch.expectZero({
        lost: figures.lost,
        order: figures.order,
        double_claims: doubleClaims,
        dup_without_crash: dupWithoutCrash,
      });
      watch.expectEqual("events checked vs appended", figures.events, appended);
      const left = await corq.subscription("recorded");
      watch.expectEqual(
        "pending and dead keys left",
        { pending: left.pending, dead: left.keys.dead },
        { pending: 0, dead: 0 },
      );
      reportScenario({
        scenario: "serve: 3 processes, SIGKILL",
        ...figures,
        doubleClaims,
        notes: { kills: killed.size, processes: PROCESSES, dup_without_crash: dupWithoutCrash, seed },
      });
      expect(figures).toMatchObject({ events: appended, lost: 0, order: 0 });
      expect(doubleClaims).toBe(0);
      expect(dupWithoutCrash).toBe(0);
      expect(killed.size).toBe(KILLS);
      expect(left).toMatchObject({ pending: 0, keys: { dead: 0 } });
    },
    TIMEOUT_MS,
  );

  it(
    "LISTENs again after the database restarts and re-checks: a wake-up sent while it was away is not lost",
    async () => {
      const watch = watchScenario("serve: database restart (LISTEN)", { testTimeoutMs: LISTEN_TIMEOUT_MS });
      const postgres = await startEmbeddedPostgres({ settings: { fsync: "off" } });
      cleanups.push(() => postgres.stop());
      const raw = new pg.Pool({ connectionString: postgres.url, max: 2 });
      raw.on("error", () => undefined); // its idle clients die with the restart
      cleanups.push(() => raw.end());
      const corq = createCorq({ databaseUrl: postgres.url, notify: true, poolSize: 2 });
      cleanups.push(() => corq.close());
      // an hour-long safety net: only a NOTIFY or the re-check after a reconnect can deliver
      const serve = await startServeProcess({
        databaseUrl: postgres.url,
        entry: "test/serve/recordingServe.ts",
        env: { CORQ_SAFETY_NET_MS: "3600000" },
      });
      cleanups.push(() => serve.stop("SIGKILL"));
      const handled = async (stream: string) =>
        (await raw.query("SELECT count(*)::int AS n FROM serve_handled WHERE key = $1", [stream])).rows[0].n;
      const appendWithRetry = async (stream: string) =>
        watch.waitFor(`an append to "${stream}"`, () => corq.append(stream, [{ name: "E", data: {} }]), {
          timeoutMs: 20_000,
          intervalMs: 50,
        });

      const pid = serve.child.pid;
      let stopping = false;
      // runs before the stop above (cleanups run in reverse)
      cleanups.push(async () => {
        stopping = true;
      });
      void serve.exited.then((code) => {
        if (!stopping) watch.fail(`serve process ${pid} exited unexpectedly (${code}): ${serve.output().slice(-4000)}`);
      });
      const handledOnce = (stream: string, timeoutMs = 15_000) =>
        watch.waitFor(`the event of "${stream}" handled`, async () => expect(await handled(stream)).toBe(1), {
          timeoutMs,
        });

      watch.step('appending "before"');
      await appendWithRetry("before");
      await handledOnce("before");

      watch.step("restarting the database");
      await postgres.restart({ mode: "fast", downMs: 1500 });
      // appended the moment the database is back: the LISTEN connection is still waiting to retry
      watch.step('appending "while-away"');
      await appendWithRetry("while-away");
      await handledOnce("while-away", 20_000);
      // (its log line may reach this process's pipe after the row reached the database)
      await watch.waitFor(
        'serve\'s "LISTEN connection back"',
        async () => expect(serve.output()).toContain("LISTEN connection back"),
        { timeoutMs: 15_000 },
      );

      watch.step('appending "after"');
      await appendWithRetry("after");
      await handledOnce("after");
      reportScenario({
        scenario: "serve: database restart (LISTEN)",
        events: 3,
        lost: 0,
        order: 0,
        doubleClaims: 0,
        dup: 0,
        notes: { restarts: 1 },
      });
    },
    LISTEN_TIMEOUT_MS,
  );
});
