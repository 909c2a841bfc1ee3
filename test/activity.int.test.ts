import { describe, expect, it } from "vitest";
import { drain, sleep, useCorq } from "./helpers/corq.js";

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
