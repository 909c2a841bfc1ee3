// A rewind in chunks that each commit (issue 30, item 4): held between two chunks (the
// `afterChunk` hook), it must keep every key's replay in log order with no live event numbered
// inside it, answer the total requeued, let other subscriptions advance meanwhile (a rewind
// that is one transaction holds the xmin horizon, and with it every advance), and a rewind whose
// holder is gone is finished by the next advance. Chunks of 2 events (`chunk`): the range is
// staged 2 events of the log at a time, then requeued 2 staged events at a time, key by key
// (a1 b1 a2 b2 a3 b3 is requeued as a1 a2 | a3 b1 | b2 b3).
import { describe, expect, it } from "vitest";
import type pg from "pg";
import { PgDialect } from "drizzle-orm/pg-core";
import { createExecutor } from "../src/db/executor.js";
import { readAdvanceBatch, writeAdvanceBatch } from "../src/sql/advance/advanceByFunction.js";
import { rewindSubscription, type RewindOptions } from "../src/rewind.js";
import type { DeliveredEvent, HandlerContext, SubscriptionDefinition } from "../src/index.js";
import { drain, useCorq } from "./helpers/corq.js";
import { until } from "./helpers/until.js";

const open = useCorq();
const dialect = new PgDialect();

type Seen = [key: string, n: string, seq: number, replay: boolean];

function recording(name: string, more: Partial<SubscriptionDefinition> = {}) {
  const seen: Seen[] = [];
  const definition: SubscriptionDefinition = {
    name,
    handle: (events: DeliveredEvent[], ctx: HandlerContext) =>
      void seen.push(...events.map((e): Seen => [ctx.key, (e.data as { n: string }).n, e.seq, e.replay])),
    ...more,
  };
  const of = (key: string) => seen.filter((s) => s[0] === key).map(([, n, seq, replay]) => [n, seq, replay]);
  return { seen, definition, of };
}

const e = (n: string, name = "E") => ({ name, data: { n, k: n.slice(0, 1) } });

/** A rewind by the library's own function, `chunk` events per statement, with a hook between chunks. */
function rewinder(raw: pg.Pool, options: Partial<RewindOptions> = {}) {
  const executor = createExecutor(raw);
  return (subscription: string, to: number | "beginning", more: Partial<RewindOptions> & { key?: string } = {}) =>
    rewindSubscription(executor, { subscription, to, key: more.key }, { chunk: 2, ...options, ...more });
}

/** a1 b1 a2 b2 a3 b3, one append each (one transaction each), handled once. */
async function sixEvents(corq: Parameters<typeof drain>[0], subscription: string) {
  for (const n of ["a1", "b1", "a2", "b2", "a3", "b3"]) await corq.append(n.slice(0, 1), [e(n)]);
  await drain(corq, subscription);
}

const keyings: [string, SubscriptionDefinition["key"]][] = [
  ["the stream", "stream"],
  ["a JSON path", "data.k"],
  ["a function", (event) => (event.data as { k: string }).k],
];

describe("a rewind in chunks", () => {
  for (const [label, key] of keyings) {
    it(`keyed by ${label}: an advance between two chunks numbers no live event inside a key's replay; the total is answered`, async () => {
      const { seen, definition, of } = recording("s", { key });
      const { corq, raw } = await open({ subscriptions: [definition] });
      await sixEvents(corq, "s");
      seen.length = 0;
      // a stays paused through the first chunks: its replayed a1 stays queued when the next
      // chunk requeues a2 (which goes after it, not "already covered")
      await corq.pauseKey("s", "a");
      const keyFunction = typeof key === "function" ? ({ kind: "function", fn: key } as const) : undefined;
      const rewind = rewinder(raw, { keyFunction });
      const between: string[] = [];
      let stagedStatistics: number | undefined;
      const result = await rewind("s", "beginning", {
        afterChunk: async ({ phase, n }) => {
          between.push(`${phase} ${n}`);
          // the requeue is planned on statistics of what was staged (test/rewindPlans.int.test.ts)
          if (phase === "requeue" && n === 1) {
            const { rows } = await raw.query(
              "SELECT reltuples FROM pg_class WHERE oid = 'corq.rewind_staged'::regclass",
            );
            stagedStatistics = rows[0].reltuples;
          }
          // live events come while the range is staged; an advance and the consumers run
          // between every two chunks (b delivers its replay as it is queued; a is paused)
          if (phase === "stage" && n === 1) {
            await corq.append("a", [e("a4")]);
            await corq.append("b", [e("b4")]);
          }
          await drain(corq, "s");
        },
      });
      expect(result.requeued).toBe(6);
      expect(stagedStatistics).toBe(6);
      // staged: a1 b1 | a2 b2 | a3 b3 | (none left); requeued: a1 a2 | a3 b1 | b2 b3 | (none left)
      expect(between).toEqual(["stage 1", "stage 2", "stage 3", "stage 4", "requeue 1", "requeue 2", "requeue 3"]);
      await corq.resumeKey("s", "a");
      await drain(corq, "s");
      expect(of("a")).toEqual([
        ["a1", 4, true],
        ["a2", 5, true],
        ["a3", 6, true],
        ["a4", 7, false],
      ]);
      expect(of("b")).toEqual([
        ["b1", 4, true],
        ["b2", 5, true],
        ["b3", 6, true],
        ["b4", 7, false],
      ]);
    });
  }

  it("a function-key advance that read before the rewind began writes nothing while it runs", async () => {
    const key = (event: { data: unknown }) => (event.data as { k: string }).k;
    const { seen, definition, of } = recording("s", { key });
    const { corq, raw } = await open({ subscriptions: [definition] });
    await sixEvents(corq, "s");
    seen.length = 0;
    await corq.append("a", [e("a4")]);
    // an advancer read a4 (no rewind yet) and is slow to write it
    const { id } = (await raw.query("SELECT id FROM corq.subscriptions")).rows[0];
    const read = dialect.sqlToQuery(readAdvanceBatch(id, { names: ["*"], streams: null, limit: 100 }));
    const [row] = (await raw.query(read.sql, read.params)).rows;
    expect(row).toMatchObject({ stream: "a", rewinding: null });
    const last = { tx: row.tx, position: Number(row.position) };
    const write = dialect.sqlToQuery(
      writeAdvanceBatch(id, {
        read: { tx: row.watermark_tx, position: Number(row.watermark_position), eraseEpoch: Number(row.erase_epoch) },
        last,
        matched: [{ ...last, key: "a", invalid: null }],
      }),
    );
    const result = await rewinder(raw, { keyFunction: { kind: "function", fn: key } })("s", "beginning", {
      afterChunk: async ({ phase, n }) => {
        if (phase === "stage" && n === 1) {
          expect((await raw.query(write.sql, write.params)).rows[0]).toEqual({ applied: 0 });
        }
      },
    });
    expect(result.requeued).toBe(6);
    await drain(corq, "s");
    expect(of("a")).toEqual([
      ["a1", 4, true],
      ["a2", 5, true],
      ["a3", 6, true],
      ["a4", 7, false],
    ]);
  });

  it("one key of a stream-keyed subscription, read by its stream in chunks, from a position", async () => {
    const { seen, definition, of } = recording("s");
    const { corq, raw } = await open({ subscriptions: [definition] });
    const { positions } = await corq.append("a", [e("a1"), e("a2")]);
    await corq.append("b", [e("b1")]);
    for (const n of ["a3", "a4", "a5"]) await corq.append("a", [e(n)]);
    await drain(corq, "s");
    seen.length = 0;
    const rewind = rewinder(raw);
    const result = await rewind("s", positions[1] ?? 0, {
      key: "a",
      afterChunk: async ({ phase, n }) => {
        if (phase === "stage" && n === 1) await corq.append("a", [e("a6")]);
        await drain(corq, "s");
      },
    });
    expect(result.requeued).toBe(4);
    await drain(corq, "s");
    expect(of("a")).toEqual([
      ["a2", 6, true],
      ["a3", 7, true],
      ["a4", 8, true],
      ["a5", 9, true],
      ["a6", 10, false],
    ]);
    expect(of("b")).toEqual([]);
  });

  it("another subscription advances and delivers while a rewind is between two chunks", async () => {
    const rewound = recording("s", { events: ["S"] });
    const other = recording("t", { events: ["T"] });
    const { corq, raw } = await open({ subscriptions: [rewound.definition, other.definition] });
    for (const n of ["a1", "b1", "a2", "b2"]) await corq.append(n.slice(0, 1), [e(n, "S")]);
    await drain(corq, "s");
    const rewind = rewinder(raw);
    const result = await rewind("s", "beginning", {
      afterChunk: async ({ phase, n }) => {
        if (phase !== "stage" || n !== 1) return;
        // appended while the rewind is under way: a rewind that held one transaction (an xid)
        // from its first chunk on would keep this event above the xmin horizon, unadvanced
        await corq.append("t", [e("t1", "T")]);
        await corq.advance({ eventNames: ["T"] });
        while ((await corq.consume("t")) !== null);
        expect(other.seen).toEqual([["t", "t1", 1, false]]);
      },
    });
    expect(result.requeued).toBe(4);
    expect(other.seen).toHaveLength(1);
  });

  it("a second rewind of the subscription waits for the one under way, then goes after it", async () => {
    const { seen, definition, of } = recording("s");
    const begins: string[] = [];
    const { corq, raw, another } = await open({ subscriptions: [definition] });
    await sixEvents(corq, "s");
    seen.length = 0;
    const second = another({
      subscriptions: [definition],
      advanceBatchSize: 2,
      onStatement: (text) => void (text.includes("rewinds = s.rewinds + 1") && begins.push(text)),
    });
    let secondDone = false;
    let secondResult: Promise<{ requeued: number }> = Promise.resolve({ requeued: 0 });
    const first = await rewinder(raw)("s", "beginning", {
      afterChunk: async ({ phase, n }) => {
        if (phase !== "stage" || n !== 1) return;
        secondResult = second.rewind("s", { to: "beginning", key: "a" }).finally(() => {
          secondDone = true;
        });
        // it tried to begin, found this one under way, and tried again: it waits
        await until(() => begins.length >= 2, { message: "the second rewind never tried again" });
        expect(secondDone).toBe(false);
      },
    });
    expect(first.requeued).toBe(6);
    expect(await secondResult).toEqual({ requeued: 3 });
    await drain(corq, "s");
    // a: the first replay (seqs 4-6) was still queued, not delivered: the second replaced it
    expect(of("a")).toEqual([
      ["a1", 7, true],
      ["a2", 8, true],
      ["a3", 9, true],
    ]);
    expect(of("b")).toEqual([
      ["b1", 4, true],
      ["b2", 5, true],
      ["b3", 6, true],
    ]);
  });

  it("a rewind whose holder is gone holds the subscription's advance until its lease ends; then the next advance finishes it, in order", async () => {
    const { seen, definition, of } = recording("s");
    const { corq, raw } = await open({ subscriptions: [definition] });
    await sixEvents(corq, "s");
    seen.length = 0;
    const crash = new Error("the holder is gone");
    await expect(
      rewinder(raw)("s", "beginning", {
        afterChunk: async ({ phase }) => {
          if (phase === "requeue") throw crash;
        },
      }),
    ).rejects.toBe(crash);
    // staged, and a1 a2 queued again; live events come while the lease still runs: not advanced
    await corq.append("a", [e("a4")]);
    await corq.append("b", [e("b4")]);
    await drain(corq, "s");
    expect(seen.map(([key, n]) => `${key}:${n}`)).toEqual(["a:a1", "a:a2"]);
    // its lease ends: the next advance takes it over, finishes it, then advances
    await raw.query("UPDATE corq.subscriptions SET rewind_until = now() - interval '1 second'");
    await drain(corq, "s");
    expect(of("a")).toEqual([
      ["a1", 4, true],
      ["a2", 5, true],
      ["a3", 6, true],
      ["a4", 7, false],
    ]);
    expect(of("b")).toEqual([
      ["b1", 4, true],
      ["b2", 5, true],
      ["b3", 6, true],
      ["b4", 7, false],
    ]);
    const { rows } = await raw.query("SELECT rewind_token FROM corq.subscriptions");
    expect(rows).toEqual([{ rewind_token: null }]);
    expect((await raw.query("SELECT count(*)::int AS n FROM corq.rewind_staged")).rows).toEqual([{ n: 0 }]);
  });

  const takenOver: ["stage" | "requeue", string, SubscriptionDefinition["key"]][] = [
    ["stage", "the stream", "stream"],
    ["stage", "a function", (event) => (event.data as { k: string }).k],
    ["requeue", "the stream", "stream"],
  ];
  for (const [takenIn, label, key] of takenOver) {
    it(`a holder whose lease ran out while it ${takenIn}s (keyed by ${label}) and was taken over stops with a conflict; the one that took over finished it`, async () => {
      const { seen, definition, of } = recording("s", { key });
      const { corq, raw } = await open({ subscriptions: [definition] });
      await sixEvents(corq, "s");
      seen.length = 0;
      const keyFunction = typeof key === "function" ? ({ kind: "function", fn: key } as const) : undefined;
      await expect(
        rewinder(raw, { keyFunction })("s", "beginning", {
          afterChunk: async ({ phase, n }) => {
            if (phase !== takenIn || n !== 1) return;
            await raw.query("UPDATE corq.subscriptions SET rewind_until = now() - interval '1 second'");
            await corq.append("a", [e("a4")]);
            await drain(corq, "s"); // its advance takes the rewind over and finishes it
          },
        }),
      ).rejects.toMatchObject({ code: "conflict" });
      await drain(corq, "s");
      expect(of("a")).toEqual([
        ["a1", 4, true],
        ["a2", 5, true],
        ["a3", 6, true],
        ["a4", 7, false],
      ]);
      expect(of("b").map(([n]) => n)).toEqual(["b1", "b2", "b3"]);
    });
  }
});
