// The Worker's connection model: one-statement operations over the HTTP query path, queued
// behind a bounded pool (as at Neon's pooler) instead of a Postgres connection per invocation.
import { describe, expect, it } from "vitest";
import { eventually, useStack } from "../helpers/stack.js";
import { HTTP_SQL_APPLICATION_NAME } from "../../cli/dev/httpSqlEndpoint.js";
import { reportScenario } from "../helpers/chaos.js";
import { holdConnection } from "../helpers/heldConnection.js";

const POOL = 5;
const { state, api } = useStack({ httpPoolSize: POOL, vars: { CORQ_CONCURRENCY: "8" } });

describe("connections", () => {
  it("100 concurrent appends over a pool of 5: all 201, all delivered in order, no WebSocket session, ≤ 5 connections", async () => {
    const sessionsBefore = state.stack.wsSessions();
    let peak = 0;
    const sampling = setInterval(() => {
      void state.db
        .query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1", [
          HTTP_SQL_APPLICATION_NAME,
        ])
        .then(
          ({ rows }) => (peak = Math.max(peak, rows[0].n)),
          () => undefined,
        );
    }, 20);
    const visitors = Array.from({ length: 20 }, (_, v) => `visitor-c${v}`);
    // 5 appends per visitor stream, all 100 at once: each carries its index so order is checkable
    const appends = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        api("POST", `/streams/${visitors[i % 20]}/events`, {
          body: { events: [{ name: "Arrived", data: { roomId: `room-${i % 20}`, i } }] },
        }),
      ),
    );
    expect(appends.map((a) => a.status).filter((s) => s !== 201)).toEqual([]);
    // the directory keys by stream: each visitor's events were handled in version order
    // (waiting for all 100 acks, not for pending = 0: the kicks may not have advanced yet)
    const acked = () =>
      state.db.query(
        `SELECT k.key, k.acked::int FROM corq.keys k JOIN corq.subscriptions s ON s.id = k.subscription_id WHERE s.name = 'visitor-directory'`,
      );
    await eventually(async () => expect((await acked()).rows.reduce((n, r) => n + r.acked, 0)).toBe(100), {
      timeoutMs: 30_000,
    });
    clearInterval(sampling);
    const { rows } = await acked();
    expect(rows).toHaveLength(20);
    expect(rows.every((r) => r.acked === 5)).toBe(true);
    for (const visitor of visitors.slice(0, 3)) {
      const stream = (await api("GET", `/streams/${visitor}`)).json.events;
      expect(stream.map((e: { version: number }) => e.version)).toEqual([0, 1, 2, 3, 4]);
    }
    expect(peak).toBeLessThanOrEqual(POOL);
    expect(state.stack.wsSessions() - sessionsBefore).toBe(0);
    reportScenario({
      scenario: "100 concurrent appends over a pool of 5",
      events: 100,
      lost: 100 - rows.reduce((n, r) => n + r.acked, 0),
      order: 0,
      doubleClaims: 0,
      dup: 0,
      notes: { refused: appends.filter((a) => a.status !== 201).length, peak_connections: peak },
    });
  });

  // Under load, through wrangler's dev server, 86 to 177 of 3,000 appends from 200 producers per
  // run failed, none written: its clients' connections closed unanswered ("other side closed")
  // and its proxy answered 503 "Your worker restarted mid-request". workerd closes a connection
  // idle for 5 s, and a request sent on it as it closes is lost. npm start's front door (cli/dev/frontDoor.ts) keeps a
  // client's connection longer than clients keep theirs, and reaches the Worker on a connection
  // of its own per request (test/frontDoor.test.ts: a Worker that drops every reused connection).
  it("a client's keep-alive connection idle for 6 s (workerd closes its own after 5 s) still carries an append: 201", async () => {
    const held = await holdConnection(state.stack.url);
    try {
      const append = () =>
        held.request("POST", "/streams/idle-client/events", {
          headers: { authorization: `Bearer ${state.stack.adminToken}`, "content-type": "application/json" },
          body: JSON.stringify({ events: [{ name: "E", data: {} }] }),
        });
      expect((await append()).status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, 6000));
      const again = await append();
      expect(again.error).toBeUndefined();
      expect(again.status).toBe(201);
      expect(JSON.parse(again.body)).toMatchObject({ stream: "idle-client", version: 1 });
    } finally {
      held.close();
    }
  }, 20_000);

  it("an interactive transaction (deleting a subscription) opens one WebSocket session, for itself", async () => {
    const sessionsBefore = state.stack.wsSessions();
    expect(
      (await api("PUT", "/subscriptions/gone", { body: { deliver: { url: "https://receiver.example/hook" } } })).status,
    ).toBe(201);
    expect(state.stack.wsSessions() - sessionsBefore).toBe(0);
    expect((await api("DELETE", "/subscriptions/gone")).status).toBe(204);
    expect(state.stack.wsSessions() - sessionsBefore).toBe(1);
  });
});
