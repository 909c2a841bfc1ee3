// The advance at its edges: keys that break the key rule, a subscription whose advance
// fails, settings or a delete that commit while an advance waits, skipped dead letters,
// code subscriptions whose code is gone.
import { describe, expect, it } from "vitest";
import type pg from "pg";
import type { StoredEvent } from "../src/index.js";
import { drain, sleep, useCorq } from "./helpers/corq.js";

const open = useCorq();
const room = (roomId: string) => ({ name: "Arrived", data: { roomId } });
const deliver = { url: "https://receiver.example/hook" };

async function lockRow(raw: pg.Pool, query: string, params: unknown[]): Promise<() => Promise<void>> {
  const client = await raw.connect();
  await client.query("BEGIN");
  await client.query(query, params);
  return async () => {
    await client.query("COMMIT");
    client.release();
  };
}

describe("the key rule", () => {
  it("skips events whose JSON-path key is empty, '.', '..' or over 512 bytes — counted with the reason, never a stall", async () => {
    const handled: string[] = [];
    const { corq } = await open({
      subscriptions: [
        { name: "rooms", key: "data.roomId", handle: (_e: StoredEvent[], ctx) => void handled.push(ctx.key) },
        { name: "all", handle: () => undefined },
      ],
    });
    const long = "r".repeat(3000);
    await corq.append("visits", [
      room("a"),
      room(long),
      room(""),
      room("."),
      room(".."),
      room("b"),
      { name: "Arrived", data: {} },
    ]);
    const edge = "é".repeat(256); // exactly 512 bytes: allowed
    const { positions } = await corq.append("more", [room(edge), room(`${edge}x`)]);
    expect(await corq.advance()).toEqual({ rooms: 3, all: 9 });
    await drain(corq, "rooms");
    expect(handled.sort()).toEqual(["a", "b", edge].sort());
    expect(await corq.subscription("rooms")).toMatchObject({
      skipped: 6, // five invalid keys, one missing
      skippedInvalidKeys: 5,
      lastSkip: { position: positions[1], reason: "key is longer than 512 bytes" },
      advanceError: null,
      lag: 0,
    });
    expect((await corq.subscription("all")).pending).toBe(9);
  });

  it("skips events whose key function gives an invalid key or throws, and keeps advancing past them", async () => {
    const keyOf = (event: StoredEvent) => {
      const k = (event.data as { k: string }).k;
      if (k === "throw") throw new TypeError("no key here");
      if (k === "object") return { not: "a key" } as unknown as string;
      return { nul: "a\u0000b", lone: "x\uD800", long: "k".repeat(513), empty: "" }[k] ?? k;
    };
    const handled: string[] = [];
    const { corq } = await open({
      subscriptions: [{ name: "fn", key: keyOf, handle: (_e: StoredEvent[], ctx) => void handled.push(ctx.key) }],
    });
    const kinds = ["ok-1", "nul", "lone", "throw", "object", "long", "empty", "ok-2"];
    const { positions } = await corq.append(
      "s",
      kinds.map((k) => ({ name: "E", data: { k } })),
    );
    expect(await corq.advance()).toEqual({ fn: 2 });
    await drain(corq, "fn");
    expect(handled).toEqual(["ok-1", "ok-2"]);
    const stats = await corq.subscription("fn");
    expect(stats).toMatchObject({
      skipped: 6,
      skippedInvalidKeys: 6,
      lastSkip: { position: positions[6], reason: "key is empty" },
      lag: 0,
    });
    // each reason, as the advance recorded it one event at a time
    const reasons: string[] = [];
    for (const k of kinds.slice(1, 7)) {
      const { corq: one } = await open({ subscriptions: [{ name: "fn", key: keyOf, handle: () => undefined }] });
      await one.append("s", [{ name: "E", data: { k } }]);
      await one.advance();
      reasons.push((await one.subscription("fn")).lastSkip!.reason);
    }
    expect(reasons).toEqual([
      "key contains U+0000 or a lone surrogate",
      "key contains U+0000 or a lone surrogate",
      "key function threw TypeError: no key here",
      "key function returned object",
      "key is longer than 512 bytes",
      "key is empty",
    ]);
  });

  it("refuses to release a dead letter named by a key that breaks the rule", async () => {
    const { corq } = await open({ subscriptions: [{ name: "s", handle: () => undefined }] });
    await corq.advance();
    await expect(corq.releaseDeadLetters({ subscription: "s", key: "" })).rejects.toMatchObject({
      code: "invalid_input",
    });
  });
});

describe("a subscription whose advance fails", () => {
  it("is recorded on that subscription and holds back neither the others nor the caller", async () => {
    const { corq, raw } = await open({
      subscriptions: [
        { name: "broken", handle: () => undefined },
        { name: "fine", handle: () => undefined },
      ],
    });
    await corq.advance();
    // the database refuses every queue row of "broken" (a fault injected in Postgres)
    await raw.query(`
      CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF NEW.subscription_id = (SELECT id FROM corq.subscriptions WHERE name = 'broken') THEN RAISE EXCEPTION 'disk says no'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse BEFORE INSERT ON corq.queue FOR EACH ROW EXECUTE FUNCTION refuse();`);
    await corq.append("s", [
      { name: "E", data: {} },
      { name: "E", data: {} },
    ]);
    expect(await corq.advance()).toEqual({ fine: 2 });
    const broken = await corq.subscription("broken");
    expect(broken.advanceError?.message).toMatch(/disk says no/);
    expect(broken).toMatchObject({ lag: 2, pending: 0 });
    expect(await corq.subscription("fine")).toMatchObject({ advanceError: null, pending: 2 });
    await raw.query("DROP TRIGGER refuse ON corq.queue");
    expect(await corq.advance()).toEqual({ broken: 2, fine: 0 });
    expect(await corq.subscription("broken")).toMatchObject({ advanceError: null, lag: 0, pending: 2 });
  });
});

describe("an advance that waits on a row lock", () => {
  it("applies a key changed while it waited (PUT returned before the event was appended)", async () => {
    const { corq, raw } = await open();
    await corq.putSubscription("first", { deliver });
    await corq.putSubscription("q", { deliver });
    await corq.advance();
    // the advance lists both subscriptions, then waits on the first one's row
    const release = await lockRow(raw, "SELECT 1 FROM corq.subscriptions WHERE name = 'first' FOR UPDATE", []);
    const advancing = corq.advance();
    await sleep(200);
    await corq.putSubscription("q", { deliver, key: "data.roomId" });
    await corq.append("visitor-1", [room("12")]);
    await release();
    await advancing;
    await corq.advance();
    expect(await corq.keys("q")).toMatchObject([{ key: "12", pending: 1 }]);
  });

  it("a subscription deleted while its advance was under way leaves no queue or key rows behind", async () => {
    const { corq, raw } = await open();
    await corq.putSubscription("d", { deliver });
    await corq.append("s1", [room("1")]);
    await corq.advance();
    // the next advance of "d" holds its subscription row while it waits for a key row
    const release = await lockRow(raw, "SELECT 1 FROM corq.keys WHERE key = 's1' FOR UPDATE", []);
    await corq.append("s1", [room("2")]);
    await corq.append("s2", [room("3")]);
    const advancing = corq.advance();
    await sleep(200);
    const deleting = corq.deleteSubscription("d"); // waits for the advance's row lock
    await sleep(200);
    await release();
    await Promise.all([advancing, deleting]);
    const { rows } = await raw.query(
      "SELECT (SELECT count(*) FROM corq.queue)::int AS queue, (SELECT count(*) FROM corq.keys)::int AS keys, (SELECT count(*) FROM corq.subscriptions)::int AS subscriptions",
    );
    expect(rows[0]).toEqual({ queue: 0, keys: 0, subscriptions: 0 });
  });
});

describe("dead letters an operator skipped", () => {
  it("are counted per subscription: one key, then all", async () => {
    const { corq } = await open({
      subscriptions: [
        {
          name: "p",
          maxAttempts: 1,
          handle: () => {
            throw new Error("no");
          },
        },
      ],
    });
    for (const stream of ["a", "b", "c"])
      await corq.append(stream, [
        { name: "E", data: {} },
        { name: "E", data: {} },
      ]);
    await drain(corq, "p");
    expect((await corq.subscription("p")).keys.dead).toBe(3);
    expect(await corq.releaseDeadLetters({ subscription: "p", key: "b", mode: "skip" })).toEqual({ released: 1 });
    expect(await corq.subscription("p")).toMatchObject({ skippedDeadLetters: 1, skipped: 0 });
    expect((await corq.deadLetters()).map((d) => d.key).sort()).toEqual(["a", "c"]);
    await drain(corq, "p");
    expect(await corq.releaseDeadLetters({ subscription: "p", mode: "skip" })).toEqual({ released: 3 });
    expect(await corq.subscription("p")).toMatchObject({ skippedDeadLetters: 4 });
  });
});

describe("code subscriptions whose code is gone", () => {
  it("are shown as orphaned and can be deleted by an instance that does not define them", async () => {
    const { corq, another } = await open({ subscriptions: [{ name: "old", handle: () => undefined }] });
    await corq.append("s", [{ name: "E", data: {} }]);
    await corq.advance();
    const other = another({ subscriptions: [{ name: "current", handle: () => undefined }] });
    await other.advance();
    const listed = Object.fromEntries((await other.stats()).subscriptions.map((s) => [s.name, s.orphaned]));
    expect(listed).toEqual({ current: false, old: true });
    expect((await corq.subscription("old")).orphaned).toBe(false);
    await expect(corq.deleteSubscription("old")).rejects.toMatchObject({ code: "conflict" });
    await other.deleteSubscription("old");
    expect((await other.stats()).subscriptions.map((s) => s.name)).toEqual(["current"]);
  });
});
