// A rewind that commits chunk by chunk holds no lock between two chunks, so what else removes
// rows — idle-key compaction, retention, erasure — can run in between. Each must leave the rewind
// a consistent range: compaction skips the rewinding subscription, retention keeps the range
// (and undoes a chunk that raced the rewind's start), erasure takes the erased events out of
// what was staged and a stage chunk that read before an erasure round committed reads again.
// Held between chunks with the `afterChunk` hook; races held by locks, seen in pg_stat_activity.
import { describe, expect, it } from "vitest";
import type pg from "pg";
import { createExecutor } from "../src/db/executor.js";
import { rewindSubscription, type RewindOptions } from "../src/rewind.js";
import { beginRewind } from "../src/sql/operate/rewind.js";
import { compactIdleKeys, type CompactedRow } from "../src/sql/housekeeping/compactIdleKeys.js";
import { lockPolicy, removeChunk, requeuedRemoved, type ChunkRow } from "../src/sql/lifecycle/retention.js";
import { beginErasure, eraseRound, holdAdvancers } from "../src/sql/log/eraseStream.js";
import type { DeliveredEvent, HandlerContext, SubscriptionDefinition } from "../src/index.js";
import { drain, useCorq } from "./helpers/corq.js";
import { present } from "./helpers/present.js";
import { waitingOnLock } from "./helpers/waitingOnLock.js";

const open = useCorq();
const DAY = 86_400_000;
const e = (n: string) => ({ name: "E", data: { n } });

/** A subscription keyed by the stream that records `key:n:seq` (`r` after a replayed one). */
function recording(name: string) {
  const seen: string[] = [];
  const definition: SubscriptionDefinition = {
    name,
    handle: (events: DeliveredEvent[], ctx: HandlerContext) =>
      void seen.push(
        ...events.map((ev) => `${ctx.key}:${(ev.data as { n: string }).n}:${ev.seq}${ev.replay ? "r" : ""}`),
      ),
  };
  return { seen, definition };
}

/** a1 b1 a2 b2 a3 b3 (one append each) on streams a and b, handled by every subscription named. */
async function sixEvents(corq: Parameters<typeof drain>[0], subscriptions: string[]) {
  for (const n of ["a1", "b1", "a2", "b2", "a3", "b3"]) await corq.append(n.slice(0, 1), [e(n)]);
  for (const name of subscriptions) await drain(corq, name);
}

/** The library's rewind of `subscription` from the beginning, 2 events per statement, with a hook between chunks. */
const rewind = (raw: pg.Pool, subscription: string, afterChunk: RewindOptions["afterChunk"]) =>
  rewindSubscription(createExecutor(raw), { subscription, to: "beginning" }, { chunk: 2, afterChunk });

const run = async <T>(
  db: pg.Pool | pg.PoolClient,
  statement: Parameters<ReturnType<typeof createExecutor>["run"]>[0],
) => createExecutor(db).run<T>(statement);

const logPositions = async (raw: pg.Pool) =>
  (await raw.query("SELECT position::int FROM corq.events ORDER BY position")).rows.map(
    (r: { position: number }) => r.position,
  );

describe("a rewind between two of its chunks", () => {
  it("is left alone by idle-key compaction (its keys' rows stay); other subscriptions are compacted", async () => {
    const s = recording("s");
    const t = recording("t");
    const { corq, raw } = await open({ subscriptions: [s.definition, t.definition] });
    await sixEvents(corq, ["s", "t"]);
    await raw.query("UPDATE corq.keys SET active_at = active_at - interval '2 hours'");
    let compacted: CompactedRow | undefined;
    s.seen.length = 0;
    const result = await rewind(raw, "s", async ({ phase, n }) => {
      if (phase === "stage" && n === 1)
        compacted = present(
          (await run<CompactedRow>(raw, compactIdleKeys({ idleMs: 3_600_000, limit: 100 })))[0],
          "row",
        );
    });
    expect(compacted).toEqual({ deleted: 2, busy: 1 }); // t's keys a and b; s is rewinding
    expect(result.requeued).toBe(6);
    await drain(corq, "s");
    expect(s.seen.sort()).toEqual(["a:a1:4r", "a:a2:5r", "a:a3:6r", "b:b1:4r", "b:b2:5r", "b:b3:6r"]);
  });

  it("keeps its range from retention: nothing at or after where it started goes until it ends", async () => {
    const s = recording("s");
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    await sixEvents(corq, ["s"]);
    const all = await logPositions(raw);
    await raw.query("UPDATE corq.events SET created_at = now() - interval '2 days'");
    await corq.setRetention({ maxAgeMs: DAY });
    const during: unknown[] = [];
    s.seen.length = 0;
    await rewind(raw, "s", async ({ phase, n }) => {
      if (phase === "stage" && n === 2) during.push(await corq.runRetention());
      if (phase === "requeue" && n === 1) during.push(await corq.runRetention());
    });
    expect(during).toEqual([
      { deleted: 0, horizon: null, done: true },
      { deleted: 0, horizon: null, done: true },
    ]);
    await drain(corq, "s");
    expect(s.seen.sort()).toEqual(["a:a1:4r", "a:a2:5r", "a:a3:6r", "b:b1:4r", "b:b2:5r", "b:b3:6r"]);
    // once it ended (and was delivered), retention removes them
    expect(await logPositions(raw)).toEqual(all);
    expect(await corq.runRetention()).toMatchObject({ deleted: 6, done: true });
  });

  it("from a position: retention removes what comes before its range, nothing from its first event on", async () => {
    const s = recording("s");
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    await sixEvents(corq, ["s"]);
    const all = await logPositions(raw);
    await raw.query("UPDATE corq.events SET created_at = now() - interval '2 days'");
    await corq.setRetention({ maxAgeMs: DAY });
    const during: unknown[] = [];
    s.seen.length = 0;
    // from a2: a1 and b1 are before the range
    const from = present(all[2], "a2's position");
    await rewindSubscription(
      createExecutor(raw),
      { subscription: "s", to: from },
      {
        chunk: 2,
        afterChunk: async ({ phase, n }) => {
          if (phase === "stage" && n === 1) during.push(await corq.runRetention());
        },
      },
    );
    expect(during).toEqual([{ deleted: 2, horizon: from, done: true }]);
    expect(await logPositions(raw)).toEqual(all.slice(2));
    await drain(corq, "s");
    expect(s.seen.sort()).toEqual(["a:a2:4r", "a:a3:5r", "b:b2:4r", "b:b3:5r"]);
  });

  it("undoes a retention chunk that removed events of a rewind marked after the chunk read the watermarks", async () => {
    const s = recording("s");
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    await sixEvents(corq, ["s"]);
    await raw.query("UPDATE corq.events SET created_at = now() - interval '2 days'");
    await corq.setRetention({ maxAgeMs: DAY });
    const chunk = await raw.connect();
    try {
      await chunk.query("BEGIN");
      await run(chunk, lockPolicy());
      const removed = present((await run<ChunkRow>(chunk, removeChunk({ sweep: 100, recheck: 0 })))[0], "row");
      expect(removed.deleted).toBe(6);
      // the rewind is marked now (it does not wait for the chunk: it locks no policy row)
      const [begun] = await run<{ begun: boolean }>(
        raw,
        beginRewind({
          subscription: "s",
          to: "beginning",
          key: undefined,
          token: crypto.randomUUID(),
          leaseMs: 30_000,
          functionKey: false,
        }),
      );
      expect(begun?.begun).toBe(true);
      const last = { tx: present(removed.last_tx, "last tx"), position: Number(removed.last_position) };
      const [check] = await run<{ requeued: boolean }>(
        chunk,
        requeuedRemoved((removed.positions ?? []).map(Number), last),
      );
      expect(check).toEqual({ requeued: true }); // so the chunk rolls back
      await chunk.query("ROLLBACK");
    } finally {
      chunk.release();
    }
    expect(await logPositions(raw)).toHaveLength(6);
  });

  it("loses the events of a stream erased meanwhile from what it staged; the other keys replay in full", async () => {
    const s = recording("s");
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    await sixEvents(corq, ["s"]);
    s.seen.length = 0;
    const staged: number[] = [];
    const result = await rewind(raw, "s", async ({ phase, n }) => {
      if (phase === "stage" && n === 2) {
        // a1 b1 a2 b2 staged
        staged.push((await raw.query("SELECT count(*)::int AS n FROM corq.rewind_staged")).rows[0].n);
        expect(await corq.eraseStream("b")).toEqual({ erased: 3 });
        staged.push((await raw.query("SELECT count(*)::int AS n FROM corq.rewind_staged")).rows[0].n);
      }
    });
    expect(staged).toEqual([4, 2]);
    expect(result.requeued).toBe(3);
    await drain(corq, "s");
    expect(s.seen.sort()).toEqual(["a:a1:4r", "a:a2:5r", "a:a3:6r"]);
    expect(await corq.key("s", "b")).toMatchObject({ status: "idle", pending: 0 });
    expect((await raw.query("SELECT count(*)::int AS n FROM corq.queue")).rows[0].n).toBe(0);
  });

  it("stages nothing a chunk read before an erasure round committed: it reads the range again", async () => {
    const s = recording("s");
    const { corq, raw } = await open({ subscriptions: [s.definition] });
    await sixEvents(corq, ["s"]);
    s.seen.length = 0;
    await run(raw, beginErasure("b"));
    const eraser = await raw.connect();
    let committed: Promise<unknown> | undefined;
    try {
      const result = await rewind(raw, "s", async ({ phase, n }) => {
        if (phase !== "stage" || n !== 1) return;
        // a round holds the subscription row; the next stage chunk (b1's successors a2 b2) takes
        // its snapshot, waits for that row, and the round commits under it
        await eraser.query("BEGIN");
        await run(eraser, holdAdvancers());
        expect(await run(eraser, eraseRound("b", 100))).toMatchObject([{ erased: 3, dequeued: 0, keys: 0 }]);
        committed = waitingOnLock(raw, "WITH sub AS (").then(() => eraser.query("COMMIT"));
      });
      await committed;
      expect(result.requeued).toBe(3); // a1 a2 a3: b1, staged by the first chunk, went with the round
    } finally {
      eraser.release();
    }
    await drain(corq, "s");
    // b1 was erased after it was staged: its staged row went with it (the round deleted it)
    expect(s.seen.sort()).toEqual(["a:a1:4r", "a:a2:5r", "a:a3:6r"]);
    expect((await raw.query("SELECT count(*)::int AS n FROM corq.queue")).rows[0].n).toBe(0);
  });
});
