// Within a stream, log order is version order, whatever the appending transaction did
// before; and a refused append says the stream's real version.
import { describe, expect, it } from "vitest";
import pg from "pg";
import { createExecutor } from "../src/db/executor.js";
import { appendEvents, type AppendRow } from "../src/sql/log/appendEvents.js";
import type { StoredEvent } from "../src/index.js";
import { drain, useCorq } from "./helpers/corq.js";

const open = useCorq();
const ev = (name: string) => ({ name, data: {} });

/** A caller's own transaction that has taken its transaction id (as any write of its own does). */
async function callerTransaction(raw: pg.Pool): Promise<pg.PoolClient> {
  const client = await raw.connect();
  await client.query("BEGIN");
  await client.query("SELECT pg_current_xact_id()");
  return client;
}

describe("per-stream order through an outbox transaction", () => {
  it("refuses an append from a transaction older than the stream's last one; delivery keeps version order", async () => {
    const handled: string[] = [];
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "visitors",
          handle: (events: StoredEvent[]) => void handled.push(...events.map((e) => `${e.name}@${e.version}`)),
        },
      ],
    });
    const caller = await callerTransaction(raw);
    const refusals: unknown[] = [];
    try {
      await corq.append("visitor-cy", [ev("Registered"), ev("Arrived")]); // another client, newer transaction, commits
      for (const expectedVersion of [undefined, 1]) {
        refusals.push(
          await corq
            .append("visitor-cy", [ev("Departed")], { tx: caller, expectedVersion })
            .catch((error: unknown) => error),
        );
      }
    } finally {
      await caller.query("ROLLBACK"); // never leave it open: it would hold the xmin horizon
      caller.release();
    }
    for (const refusal of refusals) {
      expect(refusal).toMatchObject({ code: "order_conflict", status: 409, extra: { currentVersion: 1 } });
    }
    // the caller retries in a new transaction, as with a serialization failure
    const retry = await callerTransaction(raw);
    expect(await corq.append("visitor-cy", [ev("Departed")], { tx: retry, expectedVersion: 1 })).toMatchObject({
      version: 2,
    });
    await retry.query("COMMIT");
    retry.release();
    await drain(corq, "visitors");
    expect(handled).toEqual(["Registered@0", "Arrived@1", "Departed@2"]);
    expect((await corq.readStream("visitor-cy")).map((e) => e.version)).toEqual([0, 1, 2]);
  });

  it("appends from one transaction to a stream it already appended to", async () => {
    const { corq, raw } = await open();
    const caller = await callerTransaction(raw);
    await corq.append("s", [ev("A")], { tx: caller });
    await corq.append("s", [ev("B")], { tx: caller, expectedVersion: 0 });
    await caller.query("COMMIT");
    caller.release();
    expect((await corq.readStream("s")).map((e) => e.name)).toEqual(["A", "B"]);
  });
});

describe("appends in transactions of their own are never refused for order", () => {
  // The append statement itself (corq.append would hide a refusal by trying again, up to 3
  // times): 40 connections appending at once to 2 streams. Before the statement took its
  // transaction id only once the stream's turn came, about one append in five was refused.
  it("40 concurrent connections, 2 streams: no refusal, versions contiguous, delivered in version order", async () => {
    const handled = new Map<string, number[]>();
    const { corq, url } = await open({
      subscriptions: [
        {
          name: "order",
          handle: (events: StoredEvent[]) => {
            for (const e of events) handled.set(e.stream, [...(handled.get(e.stream) ?? []), e.version]);
          },
        },
      ],
    });
    const pool = new pg.Pool({ connectionString: url, max: 40 });
    try {
      const db = createExecutor(pool);
      const refused = await Promise.all(
        Array.from({ length: 40 }, async (_, client) => {
          let n = 0;
          for (let i = 0; i < 25; i++) {
            const [row] = await db.run<AppendRow>(appendEvents(`s${(client + i) % 2}`, [ev("E")]));
            if (row?.version === null) n++;
          }
          return n;
        }),
      );
      expect(refused.reduce((sum, n) => sum + n, 0)).toBe(0);
    } finally {
      await pool.end();
    }
    for (const stream of ["s0", "s1"]) {
      const versions = (await corq.readStream(stream)).map((e) => e.version);
      expect(versions).toEqual(Array.from({ length: 500 }, (_, v) => v));
    }
    await drain(corq, "order");
    for (const stream of ["s0", "s1"]) expect(handled.get(stream)).toEqual(Array.from({ length: 500 }, (_, v) => v));
  });
});

describe("a refused append reports the stream's version after the append it waited for", () => {
  for (const [label, setup, expected] of [
    ["expectedVersion 0, the winner made it 1", ["acct", 0], 1],
    ["expectedVersion -1, the winner created it", ["fresh", -1], 0],
  ] as const) {
    it(label, async () => {
      const { corq, raw } = await open();
      const [stream, expectedVersion] = setup;
      if (expectedVersion === 0) await corq.append(stream, [ev("Opened")]);
      const winner = await raw.connect();
      await winner.query("BEGIN");
      await corq.append(stream, [ev("Won")], { tx: winner, expectedVersion });
      const loser = corq.append(stream, [ev("Lost")], { expectedVersion }).catch((error: unknown) => error);
      await new Promise((resolve) => setTimeout(resolve, 200)); // the loser waits on the stream's row
      await winner.query("COMMIT");
      winner.release();
      expect(await loser).toMatchObject({
        code: "version_conflict",
        message: `stream "${stream}" is at version ${expected}, expected ${expectedVersion}`,
        extra: { currentVersion: expected },
      });
    });
  }
});
