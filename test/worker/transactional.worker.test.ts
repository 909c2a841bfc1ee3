// Transactional handlers through the real Worker (workerd, the Neon driver over the local HTTP
// SQL endpoint): a consumer invocation opens a WebSocket session only for a transactional
// batch; the handler's writes commit with the ack — or are rolled back when it throws or its
// lease was taken over by a second invocation meanwhile.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { KeyState } from "../../src/index.js";
import { eventually, useStack } from "../helpers/stack.js";
import { app } from "./fixtures/transactionalWorker.js";

const { state, api } = useStack({
  // one consumer at a time, claiming up to 4 keys per statement: a claim of several keys
  vars: { CORQ_CONCURRENCY: "1", CORQ_KEYS_PER_CLAIM: "4" },
  worker: { entrypoint: fileURLToPath(new URL("./fixtures/transactionalWorker.ts", import.meta.url)), app },
});

const tally = (events: Record<string, unknown>[]) =>
  api("POST", `/streams/tally-${crypto.randomUUID().slice(0, 8)}/events`, {
    body: { events: events.map((data) => ({ name: "Tallied", data })) },
  });

/** Effect rows of keys, in (key, position) order: [key, position, attempt]. */
const effects = async (...keys: string[]) =>
  (
    await state.db.query(
      "SELECT key, position::int, attempt FROM tally.effects WHERE key = ANY($1) ORDER BY key, position, attempt",
      [keys],
    )
  ).rows.map((r) => [r.key, r.position, r.attempt]);

/** Batches of `key` recorded as failed (the activity record). */
const failedBatches = async (key: string) =>
  (
    await state.db.query(
      `SELECT count(*)::int AS n FROM corq.activity a JOIN corq.subscriptions s ON s.id = a.subscription_id
       WHERE s.name = 'tally' AND a.key = $1 AND a.outcome = 'failed'`,
      [key],
    )
  ).rows[0].n as number;

/** Sessions of this database inside a transaction right now (a transactional handler at work). */
const inTransaction = async () =>
  (
    await state.db.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`,
    )
  ).rows[0].n as number;

const keyState = async (key: string): Promise<KeyState | undefined> =>
  ((await api("GET", "/subscriptions/tally/keys")).json.keys as KeyState[]).find((k) => k.key === key);

describe("transactional handlers on Workers", () => {
  it("commit the handler's writes with the ack, one WebSocket session per transactional batch and none for the others", async () => {
    const sessions = state.stack.wsSessions();
    // the example's subscriptions (not transactional): no session
    const arrived = await api("POST", "/streams/visitor-tx1/events", {
      body: { events: [{ name: "Arrived", data: { roomId: "tx-room" } }] },
    });
    expect(arrived.status).toBe(201);
    await eventually(async () =>
      expect((await api("GET", "/subscriptions/room-occupancy")).json).toMatchObject({ pending: 0, lag: 0 }),
    );
    expect(state.stack.wsSessions() - sessions).toBe(0);

    const appended = await tally([{ k: "a" }, { k: "a" }, { k: "b" }]);
    expect(appended.status).toBe(201);
    const [a1, a2, b1] = appended.json.positions;
    await eventually(async () =>
      expect((await api("GET", "/subscriptions/tally")).json).toMatchObject({ pending: 0, lag: 0 }),
    );
    expect(await effects("a", "b")).toEqual([
      ["a", a1, 1],
      ["a", a2, 1],
      ["b", b1, 1],
    ]);
    const { rows } = await state.db.query(
      `SELECT count(*)::int AS n FROM corq.activity a JOIN corq.subscriptions s ON s.id = a.subscription_id
       WHERE s.name = 'tally' AND a.outcome = 'acked'`,
    );
    expect(rows[0].n).toBe(2);
    expect(state.stack.wsSessions() - sessions).toBe(2); // one per batch: a, then b
  });

  it("several keys in one claim: each key's batch in its own transaction; a throw rolls back its writes only, retried later", async () => {
    const appended = await tally([{ k: "m1" }, { k: "m2", fail: true }, { k: "m3" }, { k: "m2" }]);
    const [m1, m2a, m3, m2b] = appended.json.positions;
    // (nothing here waits for a passing state: m2's retry comes 100 ms after its failure, from
    // whoever looks first — under load, before a test could see the key in backoff)
    await eventually(async () => expect(await effects("m1", "m3")).toHaveLength(2));
    await eventually(async () => expect(await failedBatches("m2")).toBe(1));
    // one consumer (CORQ_CONCURRENCY 1) claimed the three keys together (CORQ_KEYS_PER_CLAIM 4)
    const { rows: holders } = await state.db.query(
      "SELECT DISTINCT lease_holder FROM corq.keys WHERE key IN ('m1', 'm2', 'm3') AND lease_holder IS NOT NULL",
    );
    expect(holders).toHaveLength(1);
    // later — the cron, a consumer still draining (the backoff is 100 ms), or here on request,
    // whichever comes first: the head event alone (attempt 2), then the rest (attempt 1)
    await eventually(async () => {
      await api("POST", "/consume/tally");
      expect(await keyState("m2")).toMatchObject({ pending: 0 });
    });
    // m1 and m3 committed on their first attempt; m2's first attempt threw and its write was
    // rolled back (no attempt-1 row), its head came back alone (attempt 2), then the rest
    expect(await effects("m1", "m2", "m3")).toEqual([
      ["m1", m1, 1],
      ["m2", m2a, 2],
      ["m2", m2b, 1],
      ["m3", m3, 1],
    ]);
  });

  it("check the data by its schema first: a key whose event fails it dead-letters with the validator's message and writes nothing, the other key flows", async () => {
    const appended = await tally([{ k: "v1" }, { k: "v2", fail: "yes" }, { k: "v1" }]);
    const [v1a, v2, v1b] = appended.json.positions;
    await eventually(async () =>
      expect(await effects("v1")).toEqual([
        ["v1", v1a, 1],
        ["v1", v1b, 1],
      ]),
    );
    await eventually(
      async () => {
        await api("POST", "/consume/tally");
        expect(await keyState("v2")).toMatchObject({ status: "dead", attempts: 5 });
      },
      { timeoutMs: 20_000 },
    );
    expect((await keyState("v2"))?.lastError).toMatch(
      new RegExp(
        `^EventDataInvalid: Tallied at position ${v2} \\(stream tally-[0-9a-f]+\\) failed its schema: data\\.fail: `,
      ),
    );
    expect(await effects("v2")).toEqual([]);
  });

  it("roll back the writes of a handler whose lease a second invocation took over while it ran", async () => {
    const appended = await tally([{ k: "slow", holdMs: 4000 }]);
    const [position] = appended.json.positions;
    // the dispatched consumer is in its handler, its writes made, not committed
    await eventually(async () => expect(await inTransaction()).toBe(1));
    await new Promise((resolve) => setTimeout(resolve, 1700)); // its lease (1.5 s) is over
    // a second invocation claims the key (attempt 2) and acks, with its own writes
    expect(await api("POST", "/consume/tally")).toMatchObject({
      status: 200,
      json: { key: "slow", outcome: "acked", events: 1 },
    });
    // the first one wakes, finds its lease gone at the ack, and rolls back
    await eventually(async () => expect(await inTransaction()).toBe(0), { timeoutMs: 10_000 });
    expect(await effects("slow")).toEqual([["slow", position, 2]]);
    expect(await keyState("slow")).toMatchObject({ pending: 0, attempts: 0 });
  });
});
