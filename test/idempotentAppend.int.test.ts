// Idempotent appends (API.md "Idempotent appends"): the same key, stream and events within the
// window answer the first append again and write nothing; other events under the key → 422;
// while the first is in flight (its transaction open) → 409, for that stream only; keys are per
// stream (and per caller: test/idempotencyScopes.int.test.ts); the window ends and housekeeping
// prunes. Racing retries write once.
import { describe, expect, it } from "vitest";
import { CorqError } from "../src/index.js";
import { useCorq } from "./helpers/corq.js";
import { within } from "./helpers/until.js";
import { waitingOnLock } from "./helpers/waitingOnLock.js";

const open = useCorq();
const placed = (order: string) => ({ name: "OrderPlaced", data: { order } });

async function eventsOf(raw: import("pg").Pool, stream: string): Promise<number> {
  const { rows } = await raw.query("SELECT count(*)::int AS n FROM corq.events WHERE stream = $1", [stream]);
  return rows[0].n as number;
}

const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => "ok",
    (error: unknown) => (error instanceof CorqError ? error.code : String(error)),
  );

// An append with a key in flight answers at once: one that waits for the first instead fails
// here in 5 s (not at the test's timeout)
const answerInFlight = (append: Promise<unknown>) =>
  codeOf(within(append, { timeoutMs: 5000, message: "the append waited for the one in flight instead of answering" }));

describe("idempotent append", () => {
  it("answers a repeat with the first append's version and positions, and writes nothing", async () => {
    const { corq, raw } = await open();
    const first = await corq.append("order-1", [placed("1"), placed("2")], { idempotencyKey: "req-1" });
    expect(first.replayed).toBeUndefined();
    const again = await corq.append("order-1", [placed("1"), placed("2")], { idempotencyKey: "req-1" });
    expect(again).toEqual({ ...first, replayed: true });
    // a later append moves the stream on; the key still answers its own append
    await corq.append("order-1", [placed("3")]);
    expect(await corq.append("order-1", [placed("1"), placed("2")], { idempotencyKey: "req-1" })).toEqual(again);
    expect(await eventsOf(raw, "order-1")).toBe(3);
    // with expectedVersion, as a client retrying a timed-out conditional append does
    const conditional = await corq.append("order-2", [placed("9")], { expectedVersion: -1, idempotencyKey: "req-9" });
    const retried = await corq.append("order-2", [placed("9")], { expectedVersion: -1, idempotencyKey: "req-9" });
    expect(retried).toEqual({ ...conditional, replayed: true });
    expect(await eventsOf(raw, "order-2")).toBe(1);
  });

  it("refuses the key with other events or another expectedVersion (422), writing nothing", async () => {
    const { corq, raw } = await open();
    await corq.append("order-1", [placed("1")], { idempotencyKey: "req-1" });
    expect(await codeOf(corq.append("order-1", [placed("2")], { idempotencyKey: "req-1" }))).toBe(
      "idempotency_key_reused",
    );
    expect(await codeOf(corq.append("order-1", [placed("1")], { expectedVersion: 0, idempotencyKey: "req-1" }))).toBe(
      "idempotency_key_reused",
    );
    const refusal = await corq.append("order-1", [placed("2")], { idempotencyKey: "req-1" }).catch((e) => e);
    expect(refusal).toBeInstanceOf(CorqError);
    expect((refusal as CorqError).status).toBe(422);
    expect(await eventsOf(raw, "order-1")).toBe(1);
  });

  it("scopes keys per stream, and an append without a key is never deduplicated", async () => {
    const { corq, raw } = await open();
    const one = await corq.append("order-1", [placed("1")], { idempotencyKey: "same" });
    const two = await corq.append("order-2", [placed("1")], { idempotencyKey: "same" });
    expect(two.replayed).toBeUndefined();
    expect(two.positions).not.toEqual(one.positions);
    await corq.append("order-3", [placed("1")]);
    await corq.append("order-3", [placed("1")]);
    expect([await eventsOf(raw, "order-1"), await eventsOf(raw, "order-2"), await eventsOf(raw, "order-3")]).toEqual([
      1, 1, 2,
    ]);
  });

  it("refuses a malformed key (400) before anything is written", async () => {
    const { corq, raw } = await open();
    for (const key of ["", "with space", "x".repeat(201), "naïve", "tab\there"]) {
      expect(await codeOf(corq.append("order-1", [placed("1")], { idempotencyKey: key })), key).toBe("invalid_input");
    }
    expect(await corq.append("order-1", [placed("1")], { idempotencyKey: "x".repeat(200) })).toMatchObject({
      version: 0,
    });
    expect(await eventsOf(raw, "order-1")).toBe(1);
  });

  it("answers 409 while the first is in flight in an open transaction; then replays it, or after a rollback writes", async () => {
    const { corq, raw } = await open();
    const client = await raw.connect();
    try {
      await client.query("BEGIN");
      const inTx = await corq.append("order-1", [placed("1")], { idempotencyKey: "req-1", tx: client });
      expect(await answerInFlight(corq.append("order-1", [placed("1")], { idempotencyKey: "req-1" }))).toBe(
        "idempotency_in_flight",
      );
      await client.query("COMMIT");
      expect(await corq.append("order-1", [placed("1")], { idempotencyKey: "req-1" })).toEqual({
        ...inTx,
        replayed: true,
      });

      await client.query("BEGIN");
      await corq.append("order-2", [placed("1")], { idempotencyKey: "req-2", tx: client });
      await client.query("ROLLBACK");
      // the key went with the rolled-back events: the retry is a first append
      const retried = await corq.append("order-2", [placed("1")], { idempotencyKey: "req-2" });
      expect(retried.replayed).toBeUndefined();
      expect(await eventsOf(raw, "order-2")).toBe(1);
    } finally {
      client.release();
    }
  });

  it("an append in flight holds back its key on its own stream only: the key on another stream writes at once", async () => {
    const { corq, raw } = await open();
    const client = await raw.connect();
    try {
      await client.query("BEGIN");
      const inTx = await corq.append("order-1", [placed("1")], { idempotencyKey: "req-1", tx: client });
      // the same key on order-2 is another key: no 409, no wait for order-1's transaction
      const other = await corq.append("order-2", [placed("1")], { idempotencyKey: "req-1" });
      expect(other.replayed).toBeUndefined();
      expect(await corq.append("order-2", [placed("1")], { idempotencyKey: "req-1" })).toEqual({
        ...other,
        replayed: true,
      });
      expect(await answerInFlight(corq.append("order-1", [placed("1")], { idempotencyKey: "req-1" }))).toBe(
        "idempotency_in_flight",
      );
      await client.query("COMMIT");
      expect(await corq.append("order-1", [placed("1")], { idempotencyKey: "req-1" })).toEqual({
        ...inTx,
        replayed: true,
      });
    } finally {
      client.release();
    }
    expect([await eventsOf(raw, "order-1"), await eventsOf(raw, "order-2")]).toEqual([1, 1]);
  });

  it("writes once when 30 retries of one append race each other", async () => {
    const { corq, raw, another } = await open();
    const others = [another(), another(), another()];
    for (let round = 0; round < 5; round++) {
      const stream = `order-${round}`;
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          (others[i % 3] ?? corq)
            .append(stream, [placed(String(round))], { idempotencyKey: `retry-${round}` })
            .catch((error: unknown) => (error instanceof CorqError ? error.code : error)),
        ),
      );
      expect(await eventsOf(raw, stream)).toBe(1);
      const appended = answers.filter((a): a is { version: number; positions: number[] } => typeof a === "object");
      // each is the one append's answer (fresh or replayed), or "still in flight"
      expect(new Set(appended.map((a) => JSON.stringify({ version: a.version, positions: a.positions }))).size).toBe(1);
      expect(answers.filter((a) => typeof a !== "object").every((a) => a === "idempotency_in_flight")).toBe(true);
      expect(appended.filter((a) => !("replayed" in a)).length).toBeLessThanOrEqual(1);
    }
  });

  it("writes nothing when the key's row commits after the append's statement began (it runs again and replays)", async () => {
    const { corq, raw } = await open();
    const events = [placed("1")];
    // Another append with the key, committing while this one runs: its row, inserted in an open
    // transaction (the statement's snapshot cannot see it; its insert of the row waits for it)
    const other = await raw.connect();
    try {
      await other.query("BEGIN");
      await other.query(
        `INSERT INTO corq.idempotency_keys (stream, key, fingerprint, version, positions)
         VALUES ('order-1', 'req-1', encode(sha256(convert_to($1, 'UTF8')), 'hex'), 0, '[42]')`,
        [JSON.stringify([events, null])],
      );
      const appending = corq.append("order-1", events, { idempotencyKey: "req-1" });
      await waitingOnLock(raw, "idempotency_keys");
      await other.query("COMMIT");
      expect(await appending).toEqual({ stream: "order-1", version: 0, positions: [42], replayed: true });
    } finally {
      other.release();
    }
    expect(await eventsOf(raw, "order-1")).toBe(0);
  });

  it("forgets a key after the window: the append writes again; housekeeping prunes what is past it", async () => {
    const { corq, raw, another } = await open({ idempotencyTtlMs: 60_000 });
    await corq.append("order-1", [placed("1")], { idempotencyKey: "req-1" });
    await corq.append("order-2", [placed("1")], { idempotencyKey: "req-2" });
    // the first key's append an hour ago (the database's clock decides the window)
    await raw.query("UPDATE corq.idempotency_keys SET created_at = now() - interval '1 hour' WHERE stream = 'order-1'");
    const later = await corq.append("order-1", [placed("1")], { idempotencyKey: "req-1" });
    expect(later.replayed).toBeUndefined();
    expect(await eventsOf(raw, "order-1")).toBe(2);
    // and from now on it answers with the new append
    expect(await corq.append("order-1", [placed("1")], { idempotencyKey: "req-1" })).toEqual({
      ...later,
      replayed: true,
    });
    await raw.query("UPDATE corq.idempotency_keys SET created_at = now() - interval '1 hour' WHERE stream = 'order-2'");
    const { idempotencyKeys } = await another({ idempotencyTtlMs: 60_000 }).housekeeping();
    expect(idempotencyKeys).toBe(1);
    const { rows } = await raw.query("SELECT stream FROM corq.idempotency_keys ORDER BY stream");
    expect(rows).toEqual([{ stream: "order-1" }]);
  });
});
