// Scenarios 4 and 10 against the real Worker (workerd, Neon driver, proxy) on a Postgres of
// its own: the database restarts under load (a clean stop, then a crash-like one), and more
// concurrent invocations arrive than Postgres has connections. Clients retry 503s with
// backoff; appends carry expectedVersion, so a retried append never lands twice.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmbeddedPostgres, type RunningPostgres } from "../../cli/dev/embeddedPostgres.js";
import { startLocalStack, type LocalStack } from "../../cli/dev/localStack.js";
import { reportScenario, tally, watchScenario } from "../helpers/chaos.js";
import { startReceiver } from "../helpers/receiver.js";
import { eventually } from "../helpers/stack.js";
import pg from "pg";

const scale = Number(process.env.CORQ_CHAOS_SCALE ?? 1);
const MAX_CONNECTIONS = 30;
const TIMEOUT_MS = 180_000 * scale;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let postgres: RunningPostgres;
let stack: LocalStack;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let db: pg.Pool;
let secret: string | undefined;

beforeAll(async () => {
  postgres = await startEmbeddedPostgres({ settings: { fsync: "off", max_connections: String(MAX_CONNECTIONS) } });
  stack = await startLocalStack({
    databaseUrl: postgres.url,
    cronIntervalMs: 500,
    vars: { CORQ_LOCAL: "true", CORQ_KEYS_PER_CLAIM: "4" },
  });
  db = new pg.Pool({ connectionString: postgres.url, max: 2 });
  db.on("error", () => undefined); // its idle clients die with each restart
  receiver = await startReceiver(() => secret);
  const created = await call("PUT", "/subscriptions/chaos-feed", {
    events: ["Step"],
    key: "stream",
    from: "now",
    batchSize: 10,
    maxAttempts: 1000,
    leaseMs: 5000,
    backoff: { initialMs: 50, maxMs: 500, factor: 2 },
    deliver: { url: receiver.url, timeoutMs: 4000 },
  });
  expect(created.status).toBe(201);
  secret = created.body.secret;
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  await stack?.stop();
  await db?.end();
  await postgres?.stop();
});

async function call(method: string, path: string, body?: unknown) {
  const response = await fetch(`${stack.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${stack.adminToken}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return {
    status: response.status,
    type: response.headers.get("content-type") ?? "",
    body: text ? JSON.parse(text) : null,
  };
}

/** A query from the test itself, retried while the burst holds every connection slot. */
const query = (text: string, params: unknown[] = []) =>
  eventually(() => db.query(text, params), { timeoutMs: 30_000, intervalMs: 200 });

/** Per stream: its events in log order, from Postgres. */
async function truth(prefix: string): Promise<Map<string, number[]>> {
  const { rows } = await query(
    "SELECT stream, position FROM corq.events WHERE stream LIKE $1 || '%' ORDER BY tx, position",
    [prefix],
  );
  const expected = new Map<string, number[]>();
  for (const r of rows) expected.set(r.stream, [...(expected.get(r.stream) ?? []), Number(r.position)]);
  return expected;
}

const delivered = (prefix: string) =>
  receiver.deliveries
    .filter((d) => d.key.startsWith(prefix))
    .flatMap((d) => d.events.map((e) => ({ key: d.key, position: e.position })));

describe("database restarts and connection exhaustion (Workers stack)", () => {
  it(
    "restarts under load: requests fail cleanly (503) while it is down, then appends, the cron and consumers resume; nothing lost",
    async () => {
      const watch = watchScenario("database restart under load", { testTimeoutMs: TIMEOUT_MS });
      const writers = 4;
      const perWriter = 60 * scale; // at least; writers keep appending until both restarts are over
      const statuses = new Map<number, number>();
      const healthWhileDown: number[] = []; // per restart, the last answer of /health while it was down
      let restartsOver = false;
      let appended = 0;

      const writer = async (w: number) => {
        const versions = new Map<string, number>();
        for (let seq = 0; seq < perWriter || !restartsOver; seq++) {
          const stream = `restart-${w}-${seq % 5}`;
          const expectedVersion = versions.get(stream) ?? -1;
          for (let attempt = 0; ; attempt++) {
            let status: number;
            try {
              status = (
                await call("POST", `/streams/${stream}/events`, {
                  events: [{ name: "Step", data: { seq } }],
                  expectedVersion,
                })
              ).status;
            } catch {
              status = 0; // connection refused / reset on the HTTP side
            }
            statuses.set(status, (statuses.get(status) ?? 0) + 1);
            if (status === 201) break;
            if (status === 409 && attempt > 0) {
              // an earlier attempt may have committed with its answer lost: the stream says so
              const read = await call("GET", `/streams/${stream}?from=${expectedVersion + 1}`).catch(() => undefined);
              if (read?.status === 200 && read.body.events[0]?.data.seq === seq) break;
            } else {
              // never a 500, never a 4xx for the database being away
              if (status !== 0 && status !== 503) watch.fail(`an append to ${stream} answered ${status}`);
              expect([0, 503]).toContain(status);
            }
            await sleep(Math.min(1000, 50 * 2 ** attempt) * Math.random());
          }
          versions.set(stream, expectedVersion + 1);
          appended++;
        }
      };

      const load = Promise.all(Array.from({ length: writers }, (_, w) => writer(w)));
      for (const mode of ["fast", "immediate"] as const) {
        watch.step(`appending, before a "${mode}" restart`);
        await sleep(2500);
        watch.step(`restarting the database ("${mode}")`);
        let restarted = false;
        const restarting = postgres.restart({ mode, downMs: 4000 }).then(() => (restarted = true));
        // down longer than the connect retries last (about 3 s): /health gives up and says 503
        let health = 0;
        while (!restarted && health !== 503) health = (await call("GET", "/health")).status;
        healthWhileDown.push(health);
        await restarting;
      }
      restartsOver = true;
      watch.step("the last appends");
      await load;
      watch.expectEqual("/health while the database was down", healthWhileDown, [503, 503]);
      expect(healthWhileDown).toEqual([503, 503]);

      const expected = await truth("restart-");
      const logged = [...expected.values()].reduce((n, p) => n + p.length, 0);
      watch.expectEqual("events in the log vs appends answered 201", logged, appended);
      expect(logged).toBe(appended); // each append exactly once
      watch.step("waiting for the deliveries");
      await watch.waitFor(
        "every event delivered",
        async () => expect(tally(expected, delivered("restart-")).lost).toBe(0),
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      const figures = tally(expected, delivered("restart-"));
      watch.expectZero({
        lost: figures.lost,
        order: figures.order,
        double_claims: receiver.overlaps,
        http_500: statuses.get(500) ?? 0,
      });
      reportScenario({
        scenario: "database restart under load",
        ...figures,
        doubleClaims: receiver.overlaps,
        notes: {
          restarts: 2,
          http_503: statuses.get(503) ?? 0,
          http_refused: statuses.get(0) ?? 0,
          http_500: statuses.get(500) ?? 0,
        },
      });
      expect(statuses.get(500) ?? 0).toBe(0);
      expect(figures).toMatchObject({ events: appended, lost: 0, order: 0 });
      expect(receiver.overlaps).toBe(0);
    },
    TIMEOUT_MS,
  );

  it(
    `more concurrent invocations than ${MAX_CONNECTIONS} connections: each answers 201 or 503 problem+json, state stays consistent`,
    async () => {
      const watch = watchScenario("connection exhaustion", { testTimeoutMs: TIMEOUT_MS });
      const burst = 120 * scale;
      watch.step(`${burst} requests at once`);
      const answers = await Promise.all(
        Array.from({ length: burst }, (_, i) =>
          i % 4 === 3
            ? call("GET", "/stats").then((r) => ({ i, ...r, append: false }))
            : call("POST", `/streams/burst-${i}/events`, {
                events: [{ name: "Step", data: { i } }],
                expectedVersion: -1,
              }).then((r) => ({ i, ...r, append: true })),
        ),
      );
      const count = (status: number) => answers.filter((a) => a.status === status).length;
      const unexpected = answers.filter(
        (a) =>
          ![200, 201, 503].includes(a.status) || (a.status === 503 && !a.type.includes("application/problem+json")),
      );
      if (unexpected.length > 0)
        watch.fail(
          `answers other than 2xx or a 503 problem: ${unexpected.map((a) => `${a.status} ${a.type}`).join(", ")}`,
        );
      for (const a of answers) {
        expect([200, 201, 503]).toContain(a.status);
        if (a.status === 503) expect(a.type).toContain("application/problem+json");
      }
      // a refused append wrote nothing; an accepted one wrote its event once
      for (const a of answers.filter((x) => x.append)) {
        const { rows } = await query("SELECT count(*)::int AS n FROM corq.events WHERE stream = $1", [`burst-${a.i}`]);
        watch.expectEqual(`events of burst-${a.i} (answered ${a.status})`, rows[0].n, a.status === 201 ? 1 : 0);
        expect(rows[0].n, `burst-${a.i} answered ${a.status}`).toBe(a.status === 201 ? 1 : 0);
      }
      // the refused ones, again, one by one
      watch.step("appending the refused ones again");
      for (const a of answers.filter((x) => x.append && x.status === 503)) {
        for (let attempt = 0; ; attempt++) {
          const again = await call("POST", `/streams/burst-${a.i}/events`, {
            events: [{ name: "Step", data: { i: a.i } }],
            expectedVersion: -1,
          });
          if (again.status === 201) break;
          if (again.status !== 503) watch.fail(`burst-${a.i} appended again answered ${again.status}`);
          expect(again.status).toBe(503);
          await sleep(100 * 2 ** Math.min(attempt, 4));
        }
      }
      const expected = await truth("burst-");
      watch.step("waiting for the deliveries");
      await watch.waitFor(
        "every event delivered",
        async () => expect(tally(expected, delivered("burst-")).lost).toBe(0),
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      // the queue and the counters agree, and end empty
      await watch.waitFor(
        "an empty queue and zero pending",
        async () => {
          const { rows } = await query(`SELECT (SELECT count(*) FROM corq.queue)::int AS queued,
        (SELECT coalesce(sum(pending), 0) FROM corq.keys)::int AS pending, (SELECT count(*) FROM corq.keys WHERE pending < 0)::int AS negative`);
          expect(rows[0]).toEqual({ queued: 0, pending: 0, negative: 0 });
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      const figures = tally(expected, delivered("burst-"));
      watch.expectZero({ lost: figures.lost, order: figures.order, double_claims: receiver.overlaps });
      reportScenario({
        scenario: "connection exhaustion",
        ...figures,
        doubleClaims: receiver.overlaps,
        notes: {
          requests: burst,
          max_connections: MAX_CONNECTIONS,
          http_2xx: count(200) + count(201),
          http_503: count(503),
        },
      });
      expect(figures).toMatchObject({ lost: 0, order: 0 });
      expect(receiver.overlaps).toBe(0);
    },
    TIMEOUT_MS,
  );
});
