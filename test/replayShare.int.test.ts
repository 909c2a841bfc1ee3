// A replay's share (issue 15): a claim takes live keys first and at most `replayLimit`
// replaying ones; a drain holds at most `replayKeys` replaying keys at once, so live keys that
// become ready while a large replay runs find room in every consumer.
import { describe, expect, it } from "vitest";
import type pg from "pg";
import { PgDialect } from "drizzle-orm/pg-core";
import { claimBatch, type ClaimBy } from "../src/sql/consume/claimBatch.js";
import { replayKeysFor } from "../src/consume/drainLimits.js";
import { drain, sleep, useCorq } from "./helpers/corq.js";
import { until } from "./helpers/until.js";
import { present } from "./helpers/present.js";

const open = useCorq();
const dialect = new PgDialect();
const e = (n: string) => ({ name: "E", data: { n } });

/** One claim statement as the drain runs it: the keys it took, in the order they were picked. */
async function claimKeys(raw: pg.Pool, by: ClaimBy): Promise<{ key: string; replaying: boolean }[]> {
  const { sql: text, params } = dialect.sqlToQuery(claimBatch("s", by));
  const { rows } = await raw.query(text, params);
  const keys = new Map<string, boolean>();
  for (const row of rows) if (row.key !== null && row.seq === null) keys.set(row.key, row.replaying); // key rows
  return [...keys].map(([key, replaying]) => ({ key, replaying }));
}

const r = (n: number) => `r${n}`;

describe("a replay's share of the consumers", () => {
  it("a claim takes the live keys first, then at most replayLimit replaying ones, oldest first", async () => {
    const { corq, raw } = await open({ subscriptions: [{ name: "s", handle: () => undefined }] });
    for (let i = 1; i <= 6; i++) await corq.append(r(i), [e(`${r(i)}-1`), e(`${r(i)}-2`)]);
    await drain(corq, "s");
    await corq.rewind("s", { to: "beginning" }); // r1 … r6 replaying, ready before any live key
    await sleep(5);
    for (const key of ["l1", "l2", "l3"]) await corq.append(key, [e(key)]);
    await corq.advance();

    // 3 live keys ready and 6 replaying: all the live ones, then replayLimit of the replaying
    const first = await claimKeys(raw, { limit: 6, replayLimit: 2 });
    expect(first).toEqual([
      { key: "l1", replaying: false },
      { key: "l2", replaying: false },
      { key: "l3", replaying: false },
      { key: "r1", replaying: true },
      { key: "r2", replaying: true },
    ]);
    // no live key left: still no more than replayLimit, and never past limit
    expect(await claimKeys(raw, { limit: 6, replayLimit: 2 })).toEqual([
      { key: "r3", replaying: true },
      { key: "r4", replaying: true },
    ]);
    expect(await claimKeys(raw, { limit: 1, replayLimit: 2 })).toEqual([{ key: "r5", replaying: true }]);
    // a consumer whose share is in use takes live keys only
    for (const key of ["l4", "l5"]) await corq.append(key, [e(key)]);
    await corq.advance();
    expect(await claimKeys(raw, { limit: 6, replayLimit: 0 })).toEqual([
      { key: "l4", replaying: false },
      { key: "l5", replaying: false },
    ]);
    // limit alone (a claim without a share): every key it asks for, live first
    const { rows } = await raw.query("SELECT key FROM corq.keys WHERE lease_token IS NOT NULL ORDER BY key");
    expect(rows.map((row) => row.key)).toEqual(["l1", "l2", "l3", "l4", "l5", "r1", "r2", "r3", "r4", "r5"]);
    expect(await claimKeys(raw, { limit: 6 })).toEqual([{ key: "r6", replaying: true }]);
  });

  it("a drain holds at most replayKeys replaying keys at once; live keys that come meanwhile run beside them", async () => {
    const running = new Set<string>();
    const gates = new Map<string, () => void>();
    const started: string[] = [];
    let mostReplaying = 0;
    let holding = false;
    const { corq } = await open({
      subscriptions: [
        {
          name: "s",
          batchSize: 1,
          handle: async (events, ctx) => {
            started.push(ctx.key);
            running.add(ctx.key);
            const replaying = [...running].filter((key) => key.startsWith("r")).length;
            mostReplaying = Math.max(mostReplaying, replaying);
            // while held, every replaying batch waits for the test to let it go
            if (holding && present(events[0], "the batch's first event").replay)
              await new Promise<void>((resolve) => gates.set(ctx.key, resolve));
            running.delete(ctx.key);
          },
        },
      ],
    });
    for (let i = 1; i <= 12; i++) await corq.append(r(i), [e(`${r(i)}-1`), e(`${r(i)}-2`)]);
    await drain(corq, "s");
    started.length = 0;
    mostReplaying = 0;
    holding = true;
    await corq.rewind("s", { to: "beginning" }); // 12 keys × 2 events replaying
    const keysPerClaim = 8;
    const share = replayKeysFor(keysPerClaim);
    expect(share).toBe(2);
    const draining = corq.drain("s", { keysPerClaim, budgetMs: 30_000 });
    await until(() => gates.size === share, { message: "the replaying keys never ran" });
    await sleep(100);
    expect(gates.size, "a drain took more replaying keys than its share").toBe(share);
    // live keys ready while the replay holds its share: the drain has room for them
    for (const key of ["l1", "l2", "l3"]) await corq.append(key, [e(key)]);
    await corq.advance();
    await corq.drain("s", { keysPerClaim, maxBatches: 3, budgetMs: 5000 }); // another consumer, for the wake-up
    await until(() => ["l1", "l2", "l3"].every((key) => started.includes(key)), {
      message: "live keys waited for the replay",
    });
    expect(gates.size).toBe(share);
    // one replaying batch at a time done: the drain takes one replaying key in its place, not more
    for (let round = 0; round < 3; round++) {
      const [key, release] = present([...gates][0], "a held replaying batch");
      gates.delete(key);
      release();
      await until(() => gates.size === share, { message: "the drain took no replaying key in its place" });
      await sleep(100);
      expect(gates.size, "a drain took more replaying keys than its share").toBe(share);
    }
    // let the replay go
    holding = false;
    for (const [key, release] of gates) {
      gates.delete(key);
      release();
    }
    await draining;
    expect(mostReplaying).toBe(share);
    await drain(corq, "s");
    expect(started.filter((key) => key.startsWith("r")).length).toBe(24);
  });
});
