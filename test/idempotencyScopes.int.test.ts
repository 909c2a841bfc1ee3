// Whose an Idempotency-Key is (API.md "Idempotent appends", issue 47): over HTTP, a key is the
// calling token's on that stream — another token's use of it neither replays nor refuses this
// one's, the admin's appends have a scope of their own and so do the library's; the in-flight
// check holds back the same token, stream and key only; and an erasure takes the stream's keys
// with its events, so that nothing of the erased content can be confirmed and the same append
// afterwards writes for real. Two tokens, two streams, a retry after each operation.
import { describe, expect, it } from "vitest";
import { createApi } from "../src/http/api.js";
import { createExecutor } from "../src/db/executor.js";
import { APPENDING } from "../src/sql/log/appendEvents.js";
import type { Env, OpenCorq } from "../src/http/types.js";
import { useCorq, type Opened } from "./helpers/corq.js";
import { until } from "./helpers/until.js";

const open = useCorq();
const ADMIN = "an-admin-token-of-at-least-32-characters";
// CORQ_NODE: the append answers without starting deliveries in the background
const env: Env = { CORQ_ADMIN_TOKEN: ADMIN, CORQ_NODE: {} };
const ctx = { waitUntil: () => undefined, passThroughOnException: () => undefined, props: {} };
const placed = (order: string) => ({ name: "OrderPlaced", data: { order } });

interface Answer {
  status: number;
  replayed: boolean;
  body: { version?: number; positions?: number[]; type?: string };
}

/** The API on the test's database, and its callers: two append tokens, the admin. */
async function api(opened: Opened) {
  const { corq, raw } = opened;
  const handle: OpenCorq = {
    corq,
    db: createExecutor(raw),
    statements: () => 0,
    end: async () => undefined,
  };
  const app = createApi({ subscriptions: [], open: () => handle });
  // no secret: a caller without credentials, where CORQ_PUBLIC_APPEND lets one append
  const request = async (path: string, init: RequestInit, secret: string | null) =>
    app.fetch(
      new Request(`http://127.0.0.1${path}`, {
        ...init,
        headers: { ...init.headers, ...(secret === null ? {} : { authorization: `Bearer ${secret}` }) },
      }),
      secret === null ? { ...env, CORQ_PUBLIC_APPEND: "true" } : env,
      ctx,
    );
  const caller = (secret: string | null) => ({
    append: async (stream: string, key: string, events: unknown[]): Promise<Answer> => {
      const response = await request(
        `/streams/${stream}/events`,
        {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": key },
          body: JSON.stringify({ events }),
        },
        secret,
      );
      return {
        status: response.status,
        replayed: response.headers.get("idempotent-replayed") === "true",
        body: (await response.json()) as Answer["body"],
      };
    },
  });
  const a = await corq.createToken({ name: "producer a", scopes: ["append"] });
  const b = await corq.createToken({ name: "producer b", scopes: ["append"] });
  return {
    a: caller(a.token),
    b: caller(b.token),
    admin: caller(ADMIN),
    anyone: caller(null),
    erase: async (stream: string) => (await request(`/streams/${stream}`, { method: "DELETE" }, ADMIN)).status,
  };
}

const written = (answer: Answer) => ({ status: answer.status, replayed: answer.replayed });
const FRESH = { status: 201, replayed: false };
const REPLAYED = { status: 201, replayed: true };

async function eventsOf(opened: Opened, stream: string): Promise<string[]> {
  const { rows } = await opened.raw.query(
    "SELECT data->>'order' AS o FROM corq.events WHERE stream = $1 ORDER BY version",
    [stream],
  );
  return rows.map((row) => row.o as string);
}

describe("an Idempotency-Key is the token's own, on its stream", () => {
  it("another token's use of the key first neither refuses nor replays this token's append; each retry replays its own", async () => {
    const opened = await open();
    const { a, b, admin } = await api(opened);
    // B takes key K on s1 first, with its own body
    const bFirst = await b.append("s1", "K", [placed("b")]);
    expect(written(bFirst)).toEqual(FRESH);
    expect(written(await b.append("s1", "K", [placed("b")]))).toEqual(REPLAYED);
    // A's append with K on s1: written (neither 422 for B's body nor B's answer replayed)
    const aFirst = await a.append("s1", "K", [placed("a")]);
    expect(written(aFirst)).toEqual(FRESH);
    expect(aFirst.body.positions).not.toEqual(bFirst.body.positions);
    // each retry answers its own token's first append
    const aAgain = await a.append("s1", "K", [placed("a")]);
    expect(written(aAgain)).toEqual(REPLAYED);
    expect(aAgain.body).toEqual(aFirst.body);
    const bAgain = await b.append("s1", "K", [placed("b")]);
    expect(written(bAgain)).toEqual(REPLAYED);
    expect(bAgain.body).toEqual(bFirst.body);
    // B's body under A's key is A's key reused: 422 (and B's own key is not touched by it)
    const refused = await a.append("s1", "K", [placed("b")]);
    expect(refused.status).toBe(422);
    expect(refused.body.type).toBe("urn:corq:problem:idempotency_key_reused");
    // nothing of an answer comes with the refusal
    expect(refused.body).not.toHaveProperty("positions");
    expect(refused.body).not.toHaveProperty("version");
    expect(written(await b.append("s1", "K", [placed("b")]))).toEqual(REPLAYED);
    // the admin's appends have a scope of their own: the same key and A's body write
    const adminFirst = await admin.append("s1", "K", [placed("a")]);
    expect(written(adminFirst)).toEqual(FRESH);
    const adminAgain = await admin.append("s1", "K", [placed("a")]);
    expect(written(adminAgain)).toEqual(REPLAYED);
    expect(adminAgain.body).toEqual(adminFirst.body);
    // and so do the library's own (code) appends
    const library = await opened.corq.append("s1", [placed("a")], { idempotencyKey: "K" });
    expect(library.replayed).toBeUndefined();
    expect(await opened.corq.append("s1", [placed("a")], { idempotencyKey: "K" })).toEqual({
      ...library,
      replayed: true,
    });
    // the same key on another stream is another key, for A as for B
    expect(written(await a.append("s2", "K", [placed("a")]))).toEqual(FRESH);
    expect(written(await a.append("s2", "K", [placed("a")]))).toEqual(REPLAYED);
    expect(written(await b.append("s2", "K", [placed("a")]))).toEqual(FRESH);
    expect(written(await b.append("s2", "K", [placed("a")]))).toEqual(REPLAYED);
    expect(await eventsOf(opened, "s1")).toEqual(["b", "a", "a", "a"]);
    expect(await eventsOf(opened, "s2")).toEqual(["a", "a"]);
  });

  it("without credentials (CORQ_PUBLIC_APPEND) appends share one scope, apart from the tokens', the admin's and the library's", async () => {
    const opened = await open();
    const { a, admin, anyone } = await api(opened);
    const first = await anyone.append("s1", "K", [placed("x")]);
    expect(written(first)).toEqual(FRESH);
    const again = await anyone.append("s1", "K", [placed("x")]);
    expect(written(again)).toEqual(REPLAYED);
    expect(again.body).toEqual(first.body);
    expect((await anyone.append("s1", "K", [placed("y")])).status).toBe(422);
    for (const other of [a, admin]) {
      expect(written(await other.append("s1", "K", [placed("x")]))).toEqual(FRESH);
      expect(written(await other.append("s1", "K", [placed("x")]))).toEqual(REPLAYED);
    }
    expect(await opened.corq.append("s1", [placed("x")], { idempotencyKey: "K" })).not.toHaveProperty("replayed");
    expect(await eventsOf(opened, "s1")).toEqual(["x", "x", "x", "x"]);
  });

  it("an append in flight holds back the same token's key on that stream only (409); other tokens and streams go on", async () => {
    const opened = await open();
    const { a, b, admin } = await api(opened);
    // the test holds s1's turn to append: an append to s1 takes its in-flight lock, then waits
    const holder = await opened.raw.connect();
    try {
      await holder.query("SELECT pg_advisory_lock(hashtextextended('s1', $1))", [APPENDING]);
      const waiting = async () =>
        (
          await opened.raw.query(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'advisory'",
          )
        ).rows[0].n as number;
      const aFirst = a.append("s1", "K", [placed("a")]);
      await until(async () => (await waiting()) === 1, { message: "A's append never waited for s1" });
      // A's retry while the first is in flight: 409
      const inFlight = await a.append("s1", "K", [placed("a")]);
      expect(inFlight.status).toBe(409);
      expect(inFlight.body.type).toBe("urn:corq:problem:idempotency_in_flight");
      // A's key on s2: written at once
      expect(written(await a.append("s2", "K", [placed("a")]))).toEqual(FRESH);
      // B's and the admin's appends with K to s1: not 409, they wait for s1 as any append does
      const bFirst = b.append("s1", "K", [placed("b")]);
      const adminFirst = admin.append("s1", "K", [placed("admin")]);
      await until(async () => (await waiting()) === 3, {
        message: "B's and the admin's appends to s1 did not both wait for it",
      });
      await holder.query("SELECT pg_advisory_unlock(hashtextextended('s1', $1))", [APPENDING]);
      for (const answer of await Promise.all([aFirst, bFirst, adminFirst])) expect(written(answer)).toEqual(FRESH);
    } finally {
      holder.release();
    }
    expect((await eventsOf(opened, "s1")).sort()).toEqual(["a", "admin", "b"]);
    // and each retry now replays its own
    expect(written(await a.append("s1", "K", [placed("a")]))).toEqual(REPLAYED);
    expect(written(await b.append("s1", "K", [placed("b")]))).toEqual(REPLAYED);
    expect(written(await admin.append("s1", "K", [placed("admin")]))).toEqual(REPLAYED);
  });
});

describe("an erasure takes the stream's Idempotency-Keys with its events", () => {
  it("after it, the same key and body append for real, another body is not refused; the other stream's keys stay", async () => {
    const opened = await open();
    const { a, b, erase } = await api(opened);
    const aFirst = await a.append("s1", "K1", [placed("secret-1")]);
    expect(written(await a.append("s1", "K1", [placed("secret-1")]))).toEqual(REPLAYED);
    expect(written(await a.append("s1", "K2", [placed("secret-2")]))).toEqual(FRESH);
    expect(written(await b.append("s1", "K1", [placed("secret-3")]))).toEqual(FRESH);
    expect(written(await a.append("s2", "K1", [placed("kept")]))).toEqual(FRESH);
    expect(await erase("s1")).toBe(200);
    // gone when the erasure returns: no key of s1, in any scope; s2's stays
    const { rows } = await opened.raw.query("SELECT stream, key FROM corq.idempotency_keys ORDER BY stream, key");
    expect(rows).toEqual([{ stream: "s2", key: "K1" }]);
    expect(await eventsOf(opened, "s1")).toEqual([]);

    // another body under a key used before the erasure: written, not 422 (nothing to compare it with)
    expect(written(await a.append("s1", "K2", [placed("guess")]))).toEqual(FRESH);
    expect(written(await b.append("s1", "K1", [placed("guess")]))).toEqual(FRESH);
    // the same key and body as before it: written for real (not the erased append's answer)
    const again = await a.append("s1", "K1", [placed("secret-1")]);
    expect(written(again)).toEqual(FRESH);
    expect(again.body.version).toBeGreaterThan(aFirst.body.version ?? 0);
    expect(again.body.positions).not.toEqual(aFirst.body.positions);
    expect(await eventsOf(opened, "s1")).toEqual(["guess", "guess", "secret-1"]);
    // and from now on each retry replays the append made after the erasure
    const retried = await a.append("s1", "K1", [placed("secret-1")]);
    expect(written(retried)).toEqual(REPLAYED);
    expect(retried.body).toEqual(again.body);
    expect((await b.append("s1", "K1", [placed("secret-3")])).status).toBe(422);
    expect(written(await a.append("s2", "K1", [placed("kept")]))).toEqual(REPLAYED);
    expect(await eventsOf(opened, "s1")).toEqual(["guess", "guess", "secret-1"]);
  });
});
