import { describe, expect, it } from "vitest";
import { drain, sleep, useCorq } from "./helpers/corq.js";
import { eventually } from "./helpers/stack.js";
import { PgDialect } from "drizzle-orm/pg-core";
import { recordBatches } from "../src/sql/activity/activity.js";

const open = useCorq();

describe("activity record (the dashboard's timeline and throughput)", () => {
  it("records every batch with its key, span, size and outcome, written by the ack / fail / claim statement", async () => {
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "s",
          batchSize: 10,
          maxAttempts: 2,
          leaseMs: 200,
          backoff: { initialMs: 1, maxMs: 1, factor: 1 },
          handle: async (events) => {
            await sleep(15);
            if (events.some((e) => e.name === "Poison")) throw new Error("poisoned");
          },
        },
      ],
    });
    await corq.append("good", [
      { name: "E", data: {} },
      { name: "E", data: {} },
      { name: "E", data: {} },
    ]);
    await corq.append("bad", [{ name: "Poison", data: {} }]);
    await corq.append("late", [{ name: "E", data: {} }]);
    // "late": a consumer elsewhere took the lease and vanished
    await corq.advance();
    await raw.query(`UPDATE corq.keys SET lease_token = gen_random_uuid(),
      lease_until = now() - interval '1 millisecond', available_at = now() - interval '1 millisecond' WHERE key = 'late'`);
    await drain(corq, "s");
    await sleep(5);
    await drain(corq, "s");

    const batches = await corq.activity({ subscription: "s" });
    const summary = batches.map((b) => `${b.key}:${b.outcome}:${b.events}`).sort();
    expect(summary).toEqual(["bad:dead:1", "bad:failed:1", "good:acked:3", "late:acked:1", "late:expired:0"]);
    for (const b of batches) {
      expect(Date.parse(b.finishedAt)).toBeGreaterThanOrEqual(Date.parse(b.startedAt));
      if (b.outcome !== "expired")
        expect(Date.parse(b.finishedAt) - Date.parse(b.startedAt)).toBeGreaterThanOrEqual(10);
    }
    // newest first
    const finished = batches.map((b) => Date.parse(b.finishedAt));
    expect([...finished].sort((x, y) => y - x)).toEqual(finished);

    // the acked events are counted in the current 10-second bucket, shown once it is complete
    expect((await corq.throughput({ windowMs: 60_000 })).s).toEqual([0, 0, 0, 0, 0, 0]);
    await raw.query("UPDATE corq.throughput SET bucket = bucket - interval '10 seconds'"); // ten seconds later
    const series = await corq.throughput({ windowMs: 60_000, bucketMs: 10_000 });
    expect(series.s).toEqual([0, 0, 0, 0, 0, 0.4]); // 3 + 1 events in the newest complete bucket, per second
    expect((await corq.throughput({ windowMs: 60_000, bucketMs: 30_000 })).s).toEqual([0, 4 / 30]);

    expect(await corq.pruneActivity({ olderThanMs: 60_000 })).toEqual({ pruned: 0 });
    expect(await corq.pruneActivity({ olderThanMs: 0 })).toEqual({ pruned: 5 });
    expect(await corq.activity()).toEqual([]);
    expect((await raw.query("SELECT count(*)::int AS n FROM corq.throughput")).rows[0].n).toBe(0); // pruned too
    await expect(corq.throughput({ windowMs: 20_000_000, bucketMs: 10_000 })).rejects.toMatchObject({
      code: "invalid_input",
    });
    await expect(corq.throughput({ bucketMs: 15_000 })).rejects.toMatchObject({ code: "invalid_input" });
  });

  it("shows the failing event with a dead letter when asked, and the log tail newest first", async () => {
    const { corq } = await open({
      subscriptions: [
        {
          name: "s",
          maxAttempts: 1,
          handle: () => {
            throw new Error("no");
          },
        },
      ],
    });
    await corq.append("k", [{ name: "Broken", data: { why: "test" } }]);
    await corq.append("j", [{ name: "Other", data: {} }]);
    await drain(corq, "s");
    const dead = await corq.deadLetters({ subscription: "s", withEvent: true });
    expect(dead.find((d) => d.key === "k")).toMatchObject({
      event: { stream: "k", name: "Broken", data: { why: "test" } },
    });
    expect((await corq.deadLetters({ subscription: "s" }))[0]).not.toHaveProperty("event");
    const tail = await corq.logTail({ limit: 2 });
    expect(tail.events.map((e) => e.name)).toEqual(["Other", "Broken"]);
  });
});

describe("the dashboard's timeline", () => {
  it("covers the whole window on a busy subscription: bars merged per slot, the most recently active keys, every batch counted", async () => {
    const { corq, raw } = await open({ subscriptions: [{ name: "s", handle: async () => {} }] });
    await corq.migrate();
    // 6,000 batches of one key over the last 14.5 minutes (one every 145 ms: more than the 5,000
    // newest batches the timeline used to read, which covered only the last 12 minutes; the
    // oldest half a minute inside the window, so a slow machine does not lose them),
    // and one batch each for 45 other keys, the older the higher their number
    await raw.query(`
      INSERT INTO corq.activity (subscription_id, key, started_at, finished_at, events, outcome)
      SELECT (SELECT id FROM corq.subscriptions WHERE name = 's'), 'busy',
        now() - (i * 145 + 540) * interval '1 millisecond', now() - (i * 145 + 500) * interval '1 millisecond', 2,
        CASE WHEN i % 1000 = 999 THEN 'failed' ELSE 'acked' END
      FROM generate_series(0, 5999) i`);
    await raw.query(`
      INSERT INTO corq.activity (subscription_id, key, started_at, finished_at, events, outcome)
      SELECT (SELECT id FROM corq.subscriptions WHERE name = 's'), 'k-' || i,
        now() - (i * 5 + 1) * interval '1 second', now() - i * 5 * interval '1 second', 1, 'acked'
      FROM generate_series(1, 45) i`);
    const { bars, counts } = await corq.timeline({ sinceMs: 15 * 60_000, maxKeys: 40 });
    expect(counts).toEqual({ acked: 6039, failed: 6, dead: 0, expired: 0 });
    const busy = bars.filter((b) => b.key === "busy");
    // one bar per 3-second slot and outcome (15 min / 300 slots), not one per batch
    expect(busy.length).toBeLessThanOrEqual(301 + 6);
    expect(busy.reduce((sum, b) => sum + b.batches, 0)).toBe(6000);
    expect(busy.reduce((sum, b) => sum + b.events, 0)).toBe(12_000);
    expect(busy.filter((b) => b.outcome === "failed").map((b) => b.batches)).toEqual([1, 1, 1, 1, 1, 1]);
    // the oldest bar is near the start of the window
    const oldest = Math.min(...busy.map((b) => Date.parse(b.startedAt)));
    expect(Date.now() - oldest).toBeGreaterThan(14.4 * 60_000);
    // 40 rows: busy and the 39 most recent others
    const keys = new Set(bars.map((b) => b.key));
    expect(keys.size).toBe(40);
    expect(keys.has("k-39") && !keys.has("k-40")).toBe(true);
    // a subscription filter, and a shorter window
    // (411 batches of busy and 11 others in the last minute, when no time has passed since the insert)
    const lastMinute = (await corq.timeline({ subscription: "s", sinceMs: 60_000 })).counts.acked;
    expect(lastMinute).toBeGreaterThan(380);
    expect(lastMinute).toBeLessThanOrEqual(422);
    await expect(corq.timeline({ subscription: "nope" })).resolves.toMatchObject({ bars: [], counts: { acked: 0 } });
  });

  it("activityFlushMs: acked batches of many drains wait in memory and go in one write per interval, and close() writes what waits", async () => {
    const subscriptions = [{ name: "s", handle: async () => undefined }];
    const { corq, another, raw } = await open({ subscriptions });
    // the statement that writes the batches a drain acked (its text is the same for any rows)
    const recordText = new PgDialect().sqlToQuery(recordBatches([])).sql;
    let writes = 0;
    const held = another({
      subscriptions,
      activityFlushMs: 1000,
      onStatement: (text) => void (text === recordText && writes++),
    });
    const recorded = async () =>
      (await raw.query("SELECT key FROM corq.activity ORDER BY key")).rows.map((row: { key: string }) => row.key);
    const appendAndDrain = async (instance: typeof corq, streams: string[]) => {
      for (const stream of streams) await instance.append(stream, [{ name: "E", data: {} }]);
      await instance.advance();
      expect((await instance.drain("s")).batches).toBe(streams.length);
    };

    // the default: written by the time the drain returns
    await appendAndDrain(corq, ["a1", "a2"]);
    expect(await recorded()).toEqual(["a1", "a2"]);

    // held: two drains, nothing written yet; then one write after the interval
    await appendAndDrain(held, ["b1", "b2"]);
    await appendAndDrain(held, ["b3"]);
    expect(await recorded()).toEqual(["a1", "a2"]);
    await eventually(async () => expect(await recorded()).toEqual(["a1", "a2", "b1", "b2", "b3"]), {
      timeoutMs: 5000,
    });
    expect(writes).toBe(1);
    // …with the durations histogram counted from them (the trigger on activity)
    const counted = await raw.query("SELECT sum(batches)::int AS n FROM corq.batch_durations");
    expect(counted.rows[0].n).toBe(5);

    // what waits when the instance closes is written then
    await appendAndDrain(held, ["c1", "c2"]);
    expect(await recorded()).not.toContain("c1");
    await held.close();
    expect(await recorded()).toEqual(["a1", "a2", "b1", "b2", "b3", "c1", "c2"]);
    expect(writes).toBe(2);

    await expect(async () => another({ subscriptions, activityFlushMs: -1 })).rejects.toMatchObject({
      code: "invalid_config",
    });
  });
});
