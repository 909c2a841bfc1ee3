// Delayed events (API.md "Flow control"; docs/flow-control.md): an event appended with deliverAt
// or delayMs is not delivered before its time, the key's later events wait behind it (order is
// kept), other keys are not held up; a past time delivers at once; the keys view says why a key
// waits; a rewind requeues a delayed event with its time; bad input changes nothing. On both
// consumer paths: consume (one key, one statement each way) and drain (settle-and-claim).
import { describe, expect, it } from "vitest";
import { CorqError, type Delay, type DeliveredEvent, type HandlerContext, type StoredEvent } from "../src/index.js";
import { createExecutor } from "../src/db/executor.js";
import { createApi } from "../src/http/api.js";
import { drain, sleep, useCorq, type Opened } from "./helpers/corq.js";

const open = useCorq();

interface Seen {
  key: string;
  n: number;
  at: number;
  deliverAt?: string;
}

function recording(seen: Seen[], key: "stream" | "data.room" = "stream") {
  return {
    name: "s",
    key,
    batchSize: 10,
    handle: (events: DeliveredEvent[], ctx: HandlerContext) =>
      void seen.push(
        ...events.map((e) => ({
          key: ctx.key,
          n: (e.data as { n: number }).n,
          at: Date.now(),
          ...(e.deliverAt ? { deliverAt: e.deliverAt } : {}),
        })),
      ),
  };
}

const event = (n: number, more: Delay & { room?: string } = {}) => {
  const { room, ...delay } = more;
  return { name: "E", data: { n, ...(room ? { room } : {}) }, ...delay } as const;
};

// the two consumer paths: consume() one batch at a time, and drain() with several keys per claim
const paths = {
  consume: (opened: Opened) => drain(opened.corq, "s"),
  drain: async (opened: Opened) => {
    await opened.corq.advance();
    await opened.corq.drain("s", { keysPerClaim: 4, budgetMs: 5000 });
  },
} as const;

describe.each(Object.entries(paths))("delayed events (%s)", (_path, run) => {
  it("holds the key until the delayed event's time; later events wait behind it, other keys flow", async () => {
    const seen: Seen[] = [];
    const opened = await open({ subscriptions: [recording(seen)] });
    const { corq } = opened;
    await corq.append("a", [event(1), event(2, { delayMs: 1500 }), event(3)]);
    await corq.append("b", [event(1)]);
    const appendedAt = Date.now();
    await run(opened);
    // a's first event and b went; a's delayed event and the one after it wait
    expect(seen.map((s) => [s.key, s.n])).toEqual(
      expect.arrayContaining([
        ["a", 1],
        ["b", 1],
      ]),
    );
    expect(seen).toHaveLength(2);
    const waiting = await corq.key("s", "a");
    expect(waiting).toMatchObject({ status: "backoff", pending: 2, attempts: 0 });
    expect(waiting?.reason).toMatch(/^waiting until .* for a delayed event/);
    const until = Date.parse(waiting?.availableAt ?? "");
    expect(until).toBeGreaterThanOrEqual(appendedAt + 1000);
    // the ack of event 1 set the wait itself: no claim was spent on the key after it (a claim
    // that found the delayed head would have leased it again, and given it back)
    const { rows } = await opened.raw.query("SELECT leased_at < active_at AS quiet FROM corq.keys WHERE key = 'a'");
    expect(rows[0].quiet).toBe(true);
    // stats count it apart from failed keys, with when the first may run
    expect((await corq.subscription("s")).keys).toMatchObject({
      backoff: 1,
      waiting: 1,
      waitingUntil: waiting?.availableAt,
    });
    await run(opened);
    expect(seen).toHaveLength(2); // not yet
    await sleep(until - Date.now() + 50);
    await run(opened);
    const a = seen.filter((s) => s.key === "a");
    expect(a.map((s) => s.n)).toEqual([1, 2, 3]);
    const delayed = a[1];
    expect(delayed?.deliverAt).toBe(waiting?.availableAt);
    // never before its time (the database's clock and ours are the same machine's)
    expect(delayed?.at).toBeGreaterThanOrEqual(Date.parse(delayed?.deliverAt ?? ""));
    expect(await corq.key("s", "a")).toMatchObject({ status: "idle", pending: 0 });
  });

  it("holds an idle key whose first new event is delayed, on a JSON-path key too", async () => {
    const seen: Seen[] = [];
    const opened = await open({ subscriptions: [recording(seen, "data.room")] });
    const { corq } = opened;
    const at = new Date(Date.now() + 1200);
    await corq.append("x", [event(1, { room: "r1", deliverAt: at }), event(2, { room: "r1" })]);
    await corq.append("y", [event(1, { room: "r2", deliverAt: new Date(Date.now() - 60_000) })]);
    // the advance itself makes the idle key wait for its delayed first event
    await corq.advance();
    expect(await corq.key("s", "r1")).toMatchObject({ status: "backoff", availableAt: at.toISOString() });
    await run(opened);
    // a past time delivers at once
    expect(seen.map((s) => [s.key, s.n])).toEqual([["r2", 1]]);
    expect(await corq.key("s", "r1")).toMatchObject({ availableAt: at.toISOString(), pending: 2 });
    await sleep(at.getTime() - Date.now() + 50);
    await run(opened);
    expect(seen.filter((s) => s.key === "r1").map((s) => s.n)).toEqual([1, 2]);
    expect(seen.find((s) => s.key === "r1")?.at).toBeGreaterThanOrEqual(at.getTime());
  });

  // [e1, e2 +1.6 s, e3 +0.4 s]: e3's time comes first, but it is behind e2 in the key's order,
  // so both wait for e2's time — a batch that stopped at the first event due soonest (rather
  // than the first not yet due) would hand out e2 at once. Key b flows beside it throughout.
  it("a later event due sooner waits behind an earlier delayed one (two keys, a retry after each step)", async () => {
    const seen: Seen[] = [];
    const opened = await open({ subscriptions: [recording(seen)] });
    const { corq } = opened;
    await corq.append("a", [event(1), event(2, { delayMs: 1600 }), event(3, { delayMs: 400 })]);
    await corq.append("b", [event(1)]);
    await run(opened);
    const of = (key: string) => seen.filter((s) => s.key === key).map((s) => s.n);
    expect(of("a")).toEqual([1]);
    expect(of("b")).toEqual([1]);
    const waiting = await corq.key("s", "a");
    expect(waiting).toMatchObject({ status: "backoff", pending: 2, attempts: 0 });
    const e2At = Date.parse(waiting?.availableAt ?? "");
    await run(opened); // a retry at once: nothing
    expect(of("a")).toEqual([1]);
    await sleep(600); // e3's time has passed, e2's has not
    await corq.append("b", [event(2)]);
    await run(opened);
    expect(of("a")).toEqual([1]);
    expect(of("b")).toEqual([1, 2]);
    expect(await corq.key("s", "a")).toMatchObject({ status: "backoff", availableAt: waiting?.availableAt });
    await sleep(e2At - Date.now() + 50);
    await run(opened);
    expect(of("a")).toEqual([1, 2, 3]);
    const e2 = seen.find((s) => s.key === "a" && s.n === 2);
    expect(e2?.at).toBeGreaterThanOrEqual(Date.parse(e2?.deliverAt ?? ""));
    await run(opened); // and once more: nothing left
    expect(of("a")).toEqual([1, 2, 3]);
    expect(await corq.key("s", "a")).toMatchObject({ status: "idle", pending: 0 });
  });

  // batches of one: after e1's ack the key's head is e2, not delayed — the key is ready at once;
  // only e3 (a minute ahead) waits. A key that waited for its next DELAYED event instead of its
  // head would hold e2 for the whole minute whenever a batch stops before the delayed event.
  it("after an ack, a key whose head is not delayed is ready at once, its delayed event later still waits", async () => {
    const seen: Seen[] = [];
    const opened = await open({ subscriptions: [{ ...recording(seen), batchSize: 1 }] });
    const { corq } = opened;
    await corq.append("a", [event(1), event(2), event(3, { delayMs: 60_000 }), event(4)]);
    await corq.append("b", [event(1), event(2)]);
    await run(opened);
    const of = (key: string) => seen.filter((s) => s.key === key).map((s) => s.n);
    expect(of("a")).toEqual([1, 2]);
    expect(of("b")).toEqual([1, 2]);
    const waiting = await corq.key("s", "a");
    expect(waiting).toMatchObject({ status: "backoff", pending: 2, attempts: 0 });
    expect(Date.parse(waiting?.availableAt ?? "")).toBeGreaterThan(Date.now() + 50_000);
    await run(opened); // a retry: e3 still waits, and e4 behind it
    expect(of("a")).toEqual([1, 2]);
    // more undelayed events behind the delayed one change nothing; a new key flows
    await corq.append("a", [event(5)]);
    await corq.append("c", [event(1)]);
    await run(opened);
    expect(of("a")).toEqual([1, 2]);
    expect(of("c")).toEqual([1]);
  });
});

describe("delayed events", () => {
  it("works with a key function (the advance's other path)", async () => {
    const seen: Seen[] = [];
    const opened = await open({
      subscriptions: [{ ...recording(seen), key: (e: { stream: string }) => `k-${e.stream}` }],
    });
    await opened.corq.append("a", [event(1, { delayMs: 800 }), event(2)]);
    await opened.corq.append("b", [event(1)]);
    await drain(opened.corq, "s");
    expect(seen.map((s) => [s.key, s.n])).toEqual([["k-b", 1]]);
    await sleep(900);
    await drain(opened.corq, "s");
    expect(seen.filter((s) => s.key === "k-a").map((s) => s.n)).toEqual([1, 2]);
  });

  it("a rewind requeues a delayed event with its time: past it, at once", async () => {
    const seen: Seen[] = [];
    const opened = await open({ subscriptions: [recording(seen)] });
    const { corq } = opened;
    await corq.append("a", [event(1, { delayMs: 300 }), event(2)]);
    await sleep(400);
    await drain(corq, "s");
    expect(seen.map((s) => s.n)).toEqual([1, 2]);
    await corq.rewind("s", { to: "beginning" });
    await drain(corq, "s");
    expect(seen.map((s) => s.n)).toEqual([1, 2, 1, 2]);
    // one still ahead holds the replayed key again
    await corq.append("b", [event(1, { delayMs: 60_000 })]);
    await corq.advance();
    await corq.rewind("s", { to: "beginning", key: "b" });
    await drain(corq, "s");
    expect(seen.filter((s) => s.key === "b")).toEqual([]);
    expect((await corq.key("s", "b"))?.reason).toMatch(/delayed event/);
  });

  it("refuses a bad delay and writes nothing", async () => {
    const { corq, raw } = await open();
    const far = new Date(Date.now() + 367 * 24 * 3600 * 1000);
    const bad: unknown[] = [
      { name: "E", data: {}, deliverAt: "tomorrow" },
      { name: "E", data: {}, deliverAt: "2027-01-01T10:00:00" }, // no offset
      { name: "E", data: {}, deliverAt: far.toISOString() },
      { name: "E", data: {}, delayMs: -1 },
      { name: "E", data: {}, delayMs: 1.5 },
      { name: "E", data: {}, delayMs: 367 * 24 * 3600 * 1000 },
      { name: "E", data: {}, delayMs: 10, deliverAt: new Date().toISOString() },
    ];
    for (const input of bad) {
      const refusal = await corq.append("s-1", [event(1), input as never]).catch((e: unknown) => e);
      expect(refusal, JSON.stringify(input)).toBeInstanceOf(CorqError);
      expect((refusal as CorqError).code).toBe("invalid_input");
    }
    const { rows } = await raw.query("SELECT count(*)::int AS n FROM corq.events");
    expect(rows[0].n).toBe(0);
  });
});

// Issue 47 finding 2: a key reachable through several stream prefixes can be delayed by a
// producer of any of them. A subscription caps every event's delay at its maxDelayMs (default
// a day, at most 366 days) when it advances it — never at the append: another subscription
// may allow more. Stats, the doctor and the dashboard show keys waiting more than an hour.
describe("maxDelayMs: a subscription's cap on delays", () => {
  const DAY = 86_400_000;
  const YEAR = 366 * DAY;
  const byOrder = { key: "data.order", streams: ["tenA-", "tenB-"] };
  // an event of stream `stream`, its key `order`, appended with `delayMs`
  const order = (n: number, more: { delayMs?: number } = {}) => ({
    name: "E",
    data: { n, order: "order-42" },
    ...more,
  });
  const waitsFor = async (corq: Opened["corq"], subscription: string) =>
    Date.parse((await corq.key(subscription, "order-42"))?.availableAt ?? "") - Date.now();

  it("a year's delay from one prefix holds the key for maxDelayMs at most (both advance paths), and for a year where allowed", async () => {
    const seen: Seen[] = [];
    const opened = await open({
      subscriptions: [
        { ...recording(seen), name: "capped", ...byOrder },
        {
          ...recording(seen),
          name: "fn",
          streams: byOrder.streams,
          key: (e: StoredEvent) => (e.data as { order: string }).order,
        },
        { ...recording(seen), name: "yearly", ...byOrder, maxDelayMs: YEAR },
      ],
    });
    const { corq, raw } = opened;
    await corq.append("tenA-1", [order(1, { delayMs: YEAR })]);
    await corq.append("tenB-1", [order(2)]);
    // another key in backoff for two hours after a failure: no delayed event, not counted
    await corq.append("tenB-2", [{ name: "E", data: { n: 3, order: "order-7" } }]);
    await corq.advance();
    await raw.query(
      "UPDATE corq.keys SET attempts = 1, available_at = now() + interval '2 hours' WHERE key = 'order-7'",
    );
    for (const name of ["capped", "fn"]) {
      const wait = await waitsFor(corq, name);
      expect(wait, name).toBeGreaterThan(DAY - 60_000);
      expect(wait, name).toBeLessThanOrEqual(DAY);
    }
    expect(await waitsFor(corq, "yearly")).toBeGreaterThan(YEAR - 60_000);
    // the event keeps its own time in the log (the cap is each subscription's, not the append's)
    const { rows } = await raw.query(
      "SELECT (extract(epoch FROM deliver_at - created_at) * 1000)::bigint AS ms FROM corq.events WHERE stream = 'tenA-1'",
    );
    expect(Number(rows[0].ms)).toBeGreaterThanOrEqual(YEAR); // from the append statement's start
    expect(Number(rows[0].ms)).toBeLessThan(YEAR + 1000);
    // stats and the doctor say so, per subscription
    for (const name of ["capped", "fn", "yearly"]) {
      const stats = await corq.subscription(name);
      expect(stats.maxDelayMs, name).toBe(name === "yearly" ? YEAR : DAY);
      expect(stats.keys, name).toMatchObject({ backoff: 2, waiting: 1, delayedOverHour: 1 });
    }
    const report = await corq.doctor();
    expect(report.ok).toBe(true);
    expect(
      report.findings.filter((f) => f.code === "delayed_keys").map((f) => [f.severity, f.subscription, f.delayedKeys]),
    ).toEqual([
      ["warning", "capped", 1],
      ["warning", "fn", 1],
      ["warning", "yearly", 1],
    ]);
  });

  it("a delay past a short maxDelayMs is delivered at the cap, tenant B's event behind it too; a rewind keeps the cap", async () => {
    const seen: Seen[] = [];
    const opened = await open({ subscriptions: [{ ...recording(seen), name: "s", ...byOrder, maxDelayMs: 400 }] });
    const { corq } = opened;
    await corq.append("tenA-1", [order(1, { delayMs: YEAR })]);
    await corq.append("tenB-1", [order(2)]);
    await drain(corq, "s");
    expect(seen).toEqual([]);
    expect((await corq.subscription("s")).keys.delayedOverHour).toBe(0); // 400 ms is no long delay
    await sleep(500);
    await drain(corq, "s");
    expect(seen.map((s) => s.n)).toEqual([1, 2]);
    await corq.rewind("s", { to: "beginning" });
    await drain(corq, "s");
    expect(seen.map((s) => s.n)).toEqual([1, 2, 1, 2]);
  });

  it("is 0 to 366 days, a whole number of ms: in code, and for a push subscription (nothing written)", async () => {
    for (const maxDelayMs of [-1, 1.5, YEAR + 1, "1d", null]) {
      const refusal = await open({
        subscriptions: [{ name: "s", handle: () => undefined, maxDelayMs: maxDelayMs as number }],
      }).catch((error: unknown) => error);
      expect(refusal, String(maxDelayMs)).toBeInstanceOf(CorqError);
      expect((refusal as CorqError).code).toBe("invalid_config");
    }
    const { corq } = await open({ pushAllowPrivate: true });
    const deliver = { url: "http://127.0.0.1:9/hook" };
    for (const maxDelayMs of [-1, 1.5, YEAR + 1, "1d", null]) {
      const put = await corq.putSubscription("p", { maxDelayMs, deliver } as never).catch((e: unknown) => e);
      expect((put as CorqError).code, String(maxDelayMs)).toBe("invalid_config");
    }
    expect((await corq.stats()).subscriptions).toEqual([]);
    expect((await corq.putSubscription("p", { deliver })).subscription.maxDelayMs).toBe(DAY);
    expect((await corq.putSubscription("p", { maxDelayMs: YEAR, deliver })).subscription.maxDelayMs).toBe(YEAR);
    expect((await corq.subscription("p")).maxDelayMs).toBe(YEAR);
    expect((await corq.putSubscription("p", { maxDelayMs: 0, deliver })).subscription.maxDelayMs).toBe(0);
  });

  it("changed in code, it applies from the next advance on: events queued before keep their time", async () => {
    const seen: Seen[] = [];
    const opened = await open({ subscriptions: [{ ...recording(seen), name: "s", ...byOrder, maxDelayMs: YEAR }] });
    await opened.corq.append("tenA-1", [order(1, { delayMs: 10 * DAY })]);
    await opened.corq.advance();
    const changed = opened.another({ subscriptions: [{ ...recording(seen), name: "s", ...byOrder, maxDelayMs: DAY }] });
    await changed.advance();
    expect((await changed.subscription("s")).maxDelayMs).toBe(DAY);
    expect(await waitsFor(changed, "s")).toBeGreaterThan(10 * DAY - 60_000);
    await changed.append("tenB-1", [{ name: "E", data: { n: 2, order: "order-9" }, delayMs: 10 * DAY }]);
    await changed.advance();
    const wait = Date.parse((await changed.key("s", "order-9"))?.availableAt ?? "") - Date.now();
    expect(wait).toBeLessThanOrEqual(DAY);
    expect(wait).toBeGreaterThan(DAY - 60_000);
  });

  it("over HTTP: PUT takes it and GET shows it (a bad one: a 400 problem+json, nothing written); stats and the dashboard count a key held over an hour", async () => {
    const { corq, raw } = await open({ pushAllowPrivate: true });
    const db = createExecutor(raw);
    const api = createApi({
      subscriptions: [],
      open: () => ({ corq, db, statements: () => 0, end: async () => undefined }),
    });
    const env = { CORQ_ADMIN_TOKEN: "t".repeat(32) };
    const call = (method: string, path: string, body?: unknown) =>
      api.request(
        `http://127.0.0.1${path}`,
        {
          method,
          headers: { authorization: `Bearer ${env.CORQ_ADMIN_TOKEN}`, "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        },
        env,
        { waitUntil: () => undefined, passThroughOnException: () => undefined, props: {} },
      );
    const deliver = { url: "http://127.0.0.1:9/hook" };
    for (const maxDelayMs of [-1, 1.5, YEAR + 1, "1d", null]) {
      const refused = await call("PUT", "/subscriptions/p", { maxDelayMs, deliver });
      expect(refused.status, String(maxDelayMs)).toBe(400);
      expect(refused.headers.get("content-type")).toBe("application/problem+json");
      expect(JSON.stringify(await refused.json())).toContain("maxDelayMs");
    }
    expect((await call("GET", "/subscriptions")).status).toBe(200);
    expect((await (await call("GET", "/subscriptions")).json()).subscriptions).toEqual([]);
    const put = await call("PUT", "/subscriptions/p", { maxDelayMs: 7 * DAY, deliver });
    expect(put.status).toBe(201);
    expect(await put.json()).toMatchObject({ maxDelayMs: 7 * DAY, keys: { delayedOverHour: 0 } });
    expect(await (await call("GET", "/subscriptions/p")).json()).toMatchObject({ maxDelayMs: 7 * DAY });

    // a key held for a week: stats over HTTP and the dashboard count it
    await corq.append("a", [{ name: "E", data: {}, delayMs: YEAR }]);
    await corq.advance();
    expect(await (await call("GET", "/subscriptions/p")).json()).toMatchObject({ keys: { delayedOverHour: 1 } });
    const login = await api.request(
      "http://127.0.0.1/login",
      {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://127.0.0.1" },
        body: new URLSearchParams({ token: env.CORQ_ADMIN_TOKEN }).toString(),
      },
      env,
      { waitUntil: () => undefined, passThroughOnException: () => undefined, props: {} },
    );
    expect(login.status).toBe(303);
    const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
    const page = async (path: string) =>
      (
        await api.request(`http://127.0.0.1${path}`, { headers: { cookie } }, env, {
          waitUntil: () => undefined,
          passThroughOnException: () => undefined,
          props: {},
        })
      ).text();
    expect(await page("/ui/subscriptions/p")).toMatch(/<b>1<\/b>\s*<span>delayed &gt; 1 h<\/span>/);
    expect(await page("/")).toMatch(/<b>1<\/b>\s*<span>keys delayed &gt; 1 h<\/span>/);
  });
});
