// The Worker as a pipeline: cron, fan-out over the SELF binding, concurrent consumer
// invocations, per-key order — in workerd, through the Neon driver, on real Postgres.
import { describe, expect, it } from "vitest";
import { createCorq, type EventInput } from "../../src/index.js";
import { eventually, useStack } from "../helpers/stack.js";
import { reportScenario } from "../helpers/chaos.js";
import { roomFullStream } from "../../example/roomOccupancy.js";

const { state, api } = useStack({ vars: { CORQ_CONCURRENCY: "6", CORQ_CONSUMER_BUDGET_MS: "2000" } });

/** Appends straight into the database (no HTTP, so no background kick): only the cron or a call delivers. */
async function appendQuietly(stream: string, events: EventInput[]) {
  const corq = createCorq({ databaseUrl: state.stack.databaseUrl });
  try {
    return await corq.append(stream, events);
  } finally {
    await corq.close();
  }
}

const pendingOf = async (name: string) => (await api("GET", `/subscriptions/${name}`)).json.pending as number;

describe("scheduled handler", () => {
  it("advances and dispatches consumers by itself", async () => {
    for (let v = 0; v < 12; v++)
      await appendQuietly(`visitor-s${v}`, [{ name: "Registered", data: { name: `S${v}` } }]);
    expect((await api("GET", "/subscriptions/visitor-directory")).json.lag).toBe(12);
    await state.stack.runCron();
    await eventually(async () => {
      const { rows } = await state.db.query(
        "SELECT count(*)::int AS n FROM example.visitors WHERE stream LIKE 'visitor-s%'",
      );
      expect(rows[0].n).toBe(12);
      // the greeter is drained by consumers of its own, in parallel: wait for it too
      expect(await pendingOf("greeter")).toBe(0);
    });
  });

  it("prunes the activity record older than 15 minutes", async () => {
    await state.db.query(`INSERT INTO corq.activity (subscription_id, key, started_at, finished_at, events, outcome)
      SELECT id, k, now() - interval '1 hour', now() - interval '1 hour' + ago, 1, 'acked'
      FROM corq.subscriptions, (VALUES ('old', interval '0'), ('recent', interval '50 minutes')) AS v(k, ago) WHERE name = 'greeter'`);
    await state.stack.runCron();
    await eventually(async () => {
      const { rows } = await state.db.query("SELECT key FROM corq.activity WHERE key IN ('old', 'recent')");
      expect(rows.map((r) => r.key)).toEqual(["recent"]);
    });
  });

  it("runs housekeeping: keys idle past CORQ_KEY_IDLE_MS (7 days) lose their rows; expired sessions, old webhook ids go", async () => {
    await state.db.query(`
      INSERT INTO corq.keys (subscription_id, key, active_at)
        SELECT id, k, now() - ago FROM corq.subscriptions, (VALUES ('idle-8d', interval '8 days'), ('idle-6d', interval '6 days')) v(k, ago)
        WHERE name = 'greeter';
      INSERT INTO corq.dashboard_sessions (id, expires_at) VALUES ('expired-hk', now() - interval '1 second'), ('live-hk', now() + interval '1 hour');
      INSERT INTO corq.webhook_ids (id, seen_at) VALUES ('old-hk', now() - interval '11 minutes'), ('recent-hk', now());`);
    await state.stack.runCron();
    await eventually(async () => {
      const left = async (query: string) => (await state.db.query(query)).rows.map((r) => r.id);
      expect(await left("SELECT key AS id FROM corq.keys WHERE key LIKE 'idle-%' ORDER BY key")).toEqual(["idle-6d"]);
      expect(await left("SELECT id FROM corq.dashboard_sessions WHERE id LIKE '%-hk' ORDER BY id")).toEqual([
        "live-hk",
      ]);
      expect(await left("SELECT id FROM corq.webhook_ids WHERE id LIKE '%-hk' ORDER BY id")).toEqual(["recent-hk"]);
    });
  });

  it("fans out consumer invocations over the SELF binding, up to CORQ_CONCURRENCY", async () => {
    for (let v = 0; v < 20; v++)
      await appendQuietly(`visitor-f${v}`, [{ name: "Registered", data: { name: `F${v}` } }]);
    const response = await api("POST", "/dispatch");
    expect(response.status).toBe(200);
    expect(response.json.advanced).toMatchObject({ greeter: 20, "visitor-directory": 20 });
    // this invocation consumed as the first of 6 consumers; 5 more ran as separate invocations
    expect(response.json.dispatched).toBe(5);
    expect(response.json.consumedHere).toBeGreaterThan(0);
    await eventually(async () => expect(await pendingOf("visitor-directory")).toBe(0));
  });
});

describe("overlapping cron runs", () => {
  it("three crons, two dispatches and an advance at once enqueue and deliver each event once", async () => {
    const visitors = 40;
    for (let v = 0; v < visitors; v++)
      await appendQuietly(`visitor-o${v}`, [{ name: "Registered", data: { name: `O${v}` } }]);
    const cron = () => state.stack.runCron();
    await Promise.all([
      cron(),
      cron(),
      cron(),
      api("POST", "/dispatch"),
      api("POST", "/dispatch"),
      api("POST", "/advance"),
    ]);
    await eventually(async () => expect(await pendingOf("visitor-directory")).toBe(0));
    // keys.acked counts every event acked per key: an event enqueued twice would be acked twice
    const { rows } =
      await state.db.query(`SELECT k.key, k.acked::int FROM corq.keys k JOIN corq.subscriptions s ON s.id = k.subscription_id
      WHERE s.name = 'visitor-directory' AND k.key LIKE 'visitor-o%'`);
    const acked = rows.reduce((sum, r) => sum + r.acked, 0);
    reportScenario({
      scenario: "overlapping cron runs",
      events: visitors,
      lost: visitors - rows.filter((r) => r.acked > 0).length,
      order: 0,
      doubleClaims: 0,
      dup: acked - rows.length,
      notes: { concurrent_runs: 6 },
    });
    expect(rows).toHaveLength(visitors);
    expect(rows.every((r) => r.acked === 1)).toBe(true);
  });
});

describe("concurrent consumer invocations", () => {
  it("keep per-key order: each room's process manager sees its arrivals and departures in log order", async () => {
    // each round, three visitors arrive in a room (one append each) and then leave: in log
    // order the room fills up once per round, at the third arrival — a room whose events were
    // handled in another order fills up at other events, or not at all
    const rooms = ["r1", "r2", "r3", "r4"];
    const rounds = 5;
    const expected = new Map<string, { stream: string; version: number }[]>(rooms.map((r) => [r, []]));
    for (let round = 0; round < rounds; round++) {
      for (const room of rooms) {
        const visitors = [0, 1, 2].map((j) => `visitor-c${room}-${j}`);
        for (const visitor of visitors) {
          const { version } = await appendQuietly(visitor, [{ name: "Arrived", data: { roomId: room } }]);
          if (visitor === visitors[2]) expected.get(room)!.push({ stream: visitor, version });
        }
        for (const visitor of visitors) await appendQuietly(visitor, [{ name: "Departed", data: { roomId: room } }]);
      }
    }
    await api("POST", "/advance");
    // 12 concurrent invocations at a time until nothing is ready
    for (let round = 0; ; round++) {
      if (round > 500) throw new Error("keys were still ready after 500 rounds of 12 consumers");
      const results = await Promise.all(Array.from({ length: 12 }, () => api("POST", "/consume/room-occupancy")));
      expect(results.every((r) => r.status === 200 || r.status === 204)).toBe(true);
      expect(results.filter((r) => r.status === 200).every((r) => r.json.outcome === "acked")).toBe(true);
      if (results.every((r) => r.status === 204)) break;
    }
    for (const room of rooms) {
      const causations = [];
      for (let n = 1; n <= rounds + 1; n++) {
        const events = (await api("GET", `/streams/${await roomFullStream(room, n)}`)).json.events;
        causations.push(...events.map((e: { meta: { causation: unknown } }) => e.meta.causation));
      }
      expect(causations, room).toEqual(expected.get(room));
      const { rows } = await state.db.query("SELECT occupants, times_full FROM example.rooms WHERE room = $1", [room]);
      expect(rows).toEqual([{ occupants: 0, times_full: rounds }]);
    }
    const keys = (await api("GET", "/subscriptions/room-occupancy/keys")).json.keys;
    expect(
      keys.every((k: { attempts: number; lastError: string | null }) => k.attempts === 0 && k.lastError === null),
    ).toBe(true);
  });
});
