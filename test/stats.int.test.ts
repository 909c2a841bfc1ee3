import { describe, expect, it } from "vitest";
import { PgDialect } from "drizzle-orm/pg-core";
import { listKeys } from "../src/sql/inspect/listKeys.js";
import { EXACT_COUNT_CAP } from "../src/sql/inspect/subscriptionStats.js";
import { sleep, useCorq } from "./helpers/corq.js";
import { present } from "./helpers/present.js";

const dialect = new PgDialect();

const open = useCorq();

describe("stats", () => {
  it("reports lag, pending, keys by state, oldest pending age and the log head", async () => {
    let fail = true;
    const { corq, raw } = await open({
      subscriptions: [
        {
          name: "s",
          maxAttempts: 2,
          backoff: { initialMs: 60_000, maxMs: 60_000, factor: 1 },
          leaseMs: 60_000,
          handle: () => {
            if (fail) throw new Error("down");
          },
        },
      ],
    });
    for (const stream of ["a", "b", "c", "d"])
      await corq.append(stream, [
        { name: "E", data: {} },
        { name: "E", data: {} },
      ]);
    expect(await corq.subscription("s")).toMatchObject({
      name: "s",
      kind: "code",
      events: ["*"],
      key: "stream",
      lag: 8,
      pending: 0,
      watermark: 0,
    });
    await corq.advance();
    await sleep(20);
    let stats = await corq.subscription("s");
    expect(stats).toMatchObject({ lag: 0, pending: 8, keys: { ready: 4, leased: 0, backoff: 0, dead: 0 } });
    expect(stats.watermark).toBe((await corq.stats()).log.head);
    expect(stats.oldestPendingAgeMs).toBeGreaterThanOrEqual(10);

    expect(await corq.consume("s")).toMatchObject({ key: "a", outcome: "retry" }); // a → backoff
    // b → leased by a consumer elsewhere; c has waited longest and is on its last attempt
    await raw.query(
      "UPDATE corq.keys SET lease_token = gen_random_uuid(), lease_until = now() + interval '1 minute', available_at = now() + interval '1 minute' WHERE key = 'b'",
    );
    await raw.query("UPDATE corq.keys SET attempts = 1, available_at = now() - interval '1 hour' WHERE key = 'c'");
    expect(await corq.consume("s")).toMatchObject({ key: "c", outcome: "dead" }); // c → dead
    stats = await corq.subscription("s");
    expect(stats.keys).toEqual({
      ready: 1,
      leased: 1,
      backoff: 1,
      waiting: 0,
      waitingUntil: null,
      delayedOverHour: 0,
      dead: 1,
      paused: 0,
    });
    expect(stats.pending).toBe(8);

    const byStatus = async (status: "ready" | "leased" | "backoff" | "dead") =>
      (await corq.keys("s", { status })).map((k) => k.key);
    expect([
      await byStatus("ready"),
      await byStatus("leased"),
      await byStatus("backoff"),
      await byStatus("dead"),
    ]).toEqual([["d"], ["b"], ["a"], ["c"]]);
    const [a] = await corq.keys("s", { status: "backoff" });
    expect(a).toMatchObject({ pending: 2, attempts: 1, lastError: "Error: down", lastPosition: null });
    expect(Date.parse(present(present(a, "key a").availableAt, "key a's availableAt"))).toBeGreaterThan(
      Date.now() + 30_000,
    );

    // keyset paging
    const page1 = await corq.keys("s", { limit: 2 });
    const page2 = await corq.keys("s", { limit: 2, after: present(page1[1], "the first page's last key").key });
    expect([...page1, ...page2].map((k) => k.key)).toEqual(["a", "b", "c", "d"]);

    const all = await corq.stats();
    expect(all.log).toEqual({ head: expect.any(Number), events: 8, eventsEstimated: false });
    expect(all.subscriptions.map((s) => s.name)).toEqual(["s"]);
    await expect(corq.subscription("missing")).rejects.toMatchObject({ code: "unknown_subscription" });
    await expect(corq.keys("missing")).rejects.toMatchObject({ code: "unknown_subscription" });
    expect(await corq.keys("s", { status: "idle" })).toEqual([]); // known, just nothing idle
    await expect(corq.keys("s", { limit: 0 })).rejects.toMatchObject({ code: "invalid_input" });
    fail = false;
  });

  it("counts the lag and the log exactly up to 10,000 and estimates past that, without reading every event", async () => {
    const { corq, raw } = await open({
      subscriptions: [
        { name: "s", handle: () => undefined },
        { name: "near", handle: () => undefined },
      ],
    });
    const appendMany = async (from: number, to: number) => {
      for (let i = from; i < to; i += 1000)
        await corq.append(
          `s-${i}`,
          Array.from({ length: Math.min(1000, to - i) }, () => ({ name: "E", data: {} })),
        );
    };
    await appendMany(0, EXACT_COUNT_CAP);
    // at the cap: counted
    expect(await corq.subscription("s")).toMatchObject({ lag: EXACT_COUNT_CAP, lagEstimated: false });
    expect((await corq.stats()).log).toMatchObject({ events: EXACT_COUNT_CAP, eventsEstimated: false });
    await appendMany(EXACT_COUNT_CAP, EXACT_COUNT_CAP + 2500);
    const head = present((await corq.stats()).log.head, "the log's head");
    const first = Number((await raw.query("SELECT min(position) AS p FROM corq.events")).rows[0].p);
    // past it: the positions, which count a log only appended to exactly (before and after ANALYZE)
    expect(await corq.subscription("s")).toMatchObject({ lag: head, lagEstimated: true });
    expect((await corq.stats()).log).toEqual({ head, events: head - first + 1, eventsEstimated: true });
    // each subscription's lag from its own watermark, in one stats: "near" is 100 events behind
    await raw.query(`UPDATE corq.subscriptions SET (watermark_tx, watermark_position) =
      (SELECT tx, position FROM corq.events ORDER BY tx DESC, position DESC OFFSET 100 LIMIT 1) WHERE name = 'near'`);
    expect(
      (await corq.stats()).subscriptions.map(({ name, lag, lagEstimated }) => ({ name, lag, lagEstimated })),
    ).toEqual([
      { name: "near", lag: 100, lagEstimated: false },
      { name: "s", lag: head, lagEstimated: true },
    ]);
    await raw.query("VACUUM ANALYZE corq.events");
    expect((await corq.stats()).log).toEqual({ head, events: head - first + 1, eventsEstimated: true });
    // holes inside the log (a fifth of it removed): Postgres' estimate, which sees them
    await raw.query("DELETE FROM corq.events WHERE position % 5 = 0 AND stream <> 's-0'");
    await raw.query("VACUUM ANALYZE corq.events");
    const { events, eventsEstimated } = (await corq.stats()).log;
    const left = Number((await raw.query("SELECT count(*) AS n FROM corq.events")).rows[0].n);
    expect(eventsEstimated).toBe(true);
    expect(Math.abs(events - left)).toBeLessThan(left * 0.05);
    expect(left).toBeLessThan(head - first);
    // and under the cap again: exact
    await raw.query("DELETE FROM corq.events WHERE stream <> 's-0'");
    expect((await corq.stats()).log).toMatchObject({ events: 1000, eventsEstimated: false });
  });
});

describe("keys paging at scale", () => {
  it("reads a page of keys by walking the index, whatever the status filter, the cursor and the statistics (200,000 keys)", async () => {
    const { corq, raw } = await open({ subscriptions: [{ name: "s", handle: () => undefined }] });
    await corq.advance(); // registers the subscription
    // statistics of a smaller table where dead keys were common (a tenth of 1,000: keys z…, after
    // every k… key), kept while 200,000 more keys arrive with 4 dead
    await raw.query(`
      INSERT INTO corq.keys (subscription_id, key, dead_at)
      SELECT (SELECT id FROM corq.subscriptions WHERE name = 's'), 'z' || i, CASE WHEN i % 10 = 0 THEN now() END
      FROM generate_series(1, 1000) i`);
    await raw.query("ANALYZE corq.keys");
    await raw.query(`
      INSERT INTO corq.keys (subscription_id, key, available_at, dead_at, paused_at)
      SELECT (SELECT id FROM corq.subscriptions WHERE name = 's'), 'k' || lpad(i::text, 7, '0'),
        CASE WHEN i % 1000 = 0 THEN now() END, CASE WHEN i % 50000 = 0 THEN now() END,
        CASE WHEN i % 40000 = 7 THEN now() END
      FROM generate_series(1, 200000) i`);
    for (const analyzed of [false, true]) {
      if (analyzed) await raw.query("ANALYZE corq.keys");
      for (const [status, after] of ([undefined, "dead", "ready", "idle", "paused"] as const).flatMap((status) =>
        [undefined, "k0150000"].map((after) => [status, after] as const),
      )) {
        const { sql: text, params } = dialect.sqlToQuery(listKeys("s", { status, after, limit: 50 }));
        const [
          {
            "QUERY PLAN": [plan],
          },
        ] = (await raw.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, params)).rows;
        // no node reads every key (a rare status may sort its few keys): a page costs what it returns, not the table's size
        const nodes: { "Node Type": string; "Actual Rows": number; "Rows Removed by Filter"?: number }[] = [];
        const walk = (node: any) => {
          nodes.push(node);
          for (const child of node.Plans ?? []) walk(child);
        };
        walk(plan.Plan);
        expect(nodes.map((n) => n["Node Type"])).not.toContain("Seq Scan");
        const touched = Math.max(...nodes.map((n) => n["Actual Rows"] + (n["Rows Removed by Filter"] ?? 0)));
        expect(touched, `${status} after ${after}${analyzed ? "" : ", statistics of the smaller table"}`).toBeLessThan(
          60_000,
        );
      }
    }
    const page = await corq.keys("s", { status: "dead", limit: 5 });
    expect(page.map((k) => k.key)).toEqual(["k0050000", "k0100000", "k0150000", "k0200000", "z10"]);
    const paused = await corq.keys("s", { status: "paused", limit: 50 });
    expect(paused.map((k) => k.key)).toEqual(["k0000007", "k0040007", "k0080007", "k0120007", "k0160007"]);
    // the counts read the partial indexes (ready, dead, paused), not the 200,000 keys
    expect((await corq.subscription("s")).keys).toEqual({
      ready: 200,
      leased: 0,
      backoff: 0,
      waiting: 0,
      waitingUntil: null,
      delayedOverHour: 0,
      dead: 104,
      paused: 5,
    });
  });
});
