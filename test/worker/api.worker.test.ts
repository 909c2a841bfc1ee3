// The HTTP API of docs/http-api.md against the real Worker (workerd) on real Postgres — and,
// in the "serve" project (vitest.config.ts), against `npm run serve` (the same app on Node).
import { afterAll, describe, expect, it } from "vitest";
import { sign } from "../../src/webhookSignature.js";
import { createCorq, type EventInput } from "../../src/index.js";
import { eventually, runtime, useStack } from "../helpers/stack.js";
import { reportScenario } from "../helpers/chaos.js";

// CORQ_CONCURRENCY=0 is invalid and falls back; a tiny budget keeps background consumers short.
// two webhook secrets: rotation (the stack signs with the first, dev-webhook-secret)
// the auth tests below fail 15 times from one client: more than the throttle's default (authThrottle.worker.test.ts)
const { state, api } = useStack({
  vars: {
    CORQ_MAX_BODY_BYTES: "40000",
    CORQ_WEBHOOK_SECRET: "dev-webhook-secret rotated-secret",
    CORQ_AUTH_FAILURE_LIMIT: "100",
  },
});

/**
 * Appends straight into the database: an append over HTTP kicks background consumers, which
 * look for ready keys again when done and could take the event before the test's own calls.
 */
async function appendQuietly(stream: string, event: EventInput) {
  const corq = createCorq({ databaseUrl: state.stack.databaseUrl });
  try {
    await corq.append(stream, [event]);
  } finally {
    await corq.close();
  }
}

// auth refusals (no token, wrong token, bad / stale / tampered / replayed signatures), for the chaos summary
let refusedByAuth = 0;
afterAll(() =>
  reportScenario({
    scenario: "auth",
    events: 0,
    lost: 0,
    order: 0,
    doubleClaims: 0,
    dup: 0,
    notes: { refused: refusedByAuth },
  }),
);

/**
 * Pauses or resumes behind the API's back: `npm run serve` wakes its consumers on every API
 * write, and they would take a key the test means to consume itself.
 */
const setPaused = (subscription: string, paused: boolean) =>
  state.db.query("UPDATE corq.subscriptions SET paused = $2 WHERE name = $1", [subscription, paused]);

const count = async (table: string) =>
  Number((await state.db.query(`SELECT count(*) FROM corq.${table}`)).rows[0].count);

function expectProblem(response: { status: number; type: string; json: any }, status: number) {
  expect(response.status).toBe(status);
  expect(response.type).toContain("application/problem+json");
  expect(response.json).toMatchObject({
    type: expect.any(String),
    title: expect.any(String),
    status,
    detail: expect.any(String),
  });
}

describe("health", () => {
  it("answers 200 without a token", async () => {
    const response = await api("GET", "/health", { token: null });
    expect(response).toMatchObject({ status: 200, json: { ok: true, db: "ok" } });
  });
});

describe("event log", () => {
  it("appends, reads a stream and the global log; delivers in the background", async () => {
    const created = await api("POST", "/streams/visitor-ada/events", {
      body: {
        events: [
          { name: "Registered", data: { name: "Ada" } },
          { name: "Arrived", data: { roomId: "7" }, meta: { by: "test" } },
        ],
        expectedVersion: -1,
      },
    });
    expect(created).toMatchObject({
      status: 201,
      json: { stream: "visitor-ada", version: 1, positions: [expect.any(Number), expect.any(Number)] },
    });
    const stream = await api("GET", "/streams/visitor-ada?from=1&limit=10");
    expect(stream.json).toMatchObject({
      stream: "visitor-ada",
      events: [{ version: 1, name: "Arrived", data: { roomId: "7" }, meta: { by: "test" } }],
    });
    const log = await api("GET", "/events?after=0&limit=1");
    expect(log.json.events).toHaveLength(1);
    expect(log.json.next).toBe(log.json.events[0].position);
    // the append kicked an advance and consumers: the process manager wrote the room's state
    await eventually(async () => {
      const { rows } = await state.db.query("SELECT occupants FROM example.rooms WHERE room = '7'");
      expect(rows).toEqual([{ occupants: 1 }]);
    });
  });

  it("refuses a version conflict with 409 and writes nothing", async () => {
    // this stream's events only: the example app's handlers append to streams of their own meanwhile
    const streamEvents = async () =>
      Number((await state.db.query("SELECT count(*) FROM corq.events WHERE stream = 'visitor-ada'")).rows[0].count);
    const before = await streamEvents();
    const response = await api("POST", "/streams/visitor-ada/events", {
      body: { events: [{ name: "Departed", data: {} }], expectedVersion: 0 },
    });
    expectProblem(response, 409);
    expect(await streamEvents()).toBe(before);
  });

  it("Idempotency-Key: a retry answers the first 201 again (Idempotent-Replayed), another body 422, nothing twice", async () => {
    const streamEvents = async (stream: string) =>
      Number((await state.db.query("SELECT count(*) FROM corq.events WHERE stream = $1", [stream])).rows[0].count);
    const append = (stream: string, key: string, body: unknown) =>
      fetch(`${state.stack.url}/streams/${stream}/events`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${state.stack.adminToken}`,
          "content-type": "application/json",
          "idempotency-key": key,
        },
        body: JSON.stringify(body),
      });
    const body = { events: [{ name: "Paid", data: { cents: 100 } }], expectedVersion: -1 };
    const first = await append("payment-1", "pay-1", body);
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const firstJson = await first.json();
    const again = await append("payment-1", "pay-1", body);
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.json()).toEqual(firstJson); // the same body: no `replayed` member
    const other = await append("payment-1", "pay-1", { ...body, events: [{ name: "Paid", data: { cents: 999 } }] });
    expect(other.status).toBe(422);
    expect(other.headers.get("content-type")).toContain("application/problem+json");
    expect((await other.json()).type).toContain("idempotency_key_reused");
    // the same key on another stream is another key
    expect((await append("payment-2", "pay-1", body)).status).toBe(201);
    const malformed = await append("payment-3", "pay 1", body);
    expect(malformed.status).toBe(400);
    expect(await malformed.text()).toContain("Idempotency-Key");
    expect([await streamEvents("payment-1"), await streamEvents("payment-2"), await streamEvents("payment-3")]).toEqual(
      [1, 1, 0],
    );
  });

  it("refuses bad input with 4xx problem+json and writes nothing", async () => {
    const before = await count("events");
    const cases: [number, Parameters<typeof api>][] = [
      [400, ["POST", "/streams/s/events", { body: "{not json" }]],
      [400, ["POST", "/streams/s/events", { body: { events: [] } }]],
      [400, ["POST", "/streams/s/events", { body: { events: [{ name: "bad name", data: {} }] } }]],
      [400, ["POST", "/streams/s/events", { body: { events: [{ name: "Ok", data: {} }], expectedVersion: "1" } }]],
      [
        400,
        [
          "POST",
          "/streams/s/events",
          { body: { events: Array.from({ length: 1001 }, () => ({ name: "E", data: 1 })) } },
        ],
      ],
      [400, ["POST", "/streams/bad%20stream/events", { body: { events: [{ name: "Ok", data: {} }] } }]],
      // delays: not a date, no offset, too far ahead, negative, both at once
      [400, ["POST", "/streams/s/events", { body: { events: [{ name: "Ok", data: {}, deliverAt: "soon" }] } }]],
      [
        400,
        [
          "POST",
          "/streams/s/events",
          { body: { events: [{ name: "Ok", data: {}, deliverAt: "2027-01-01T10:00:00" }] } },
        ],
      ],
      [
        400,
        [
          "POST",
          "/streams/s/events",
          { body: { events: [{ name: "Ok", data: {}, deliverAt: "2099-01-01T00:00:00Z" }] } },
        ],
      ],
      [400, ["POST", "/streams/s/events", { body: { events: [{ name: "Ok", data: {}, delayMs: -1 }] } }]],
      [
        400,
        [
          "POST",
          "/streams/s/events",
          { body: { events: [{ name: "Ok", data: {}, delayMs: 5, deliverAt: "2026-01-01T00:00:00Z" }] } },
        ],
      ],
      [400, ["POST", "/streams/..%2F..%2Fetc/events", { body: { events: [{ name: "Ok", data: {} }] } }]],
      [
        415,
        [
          "POST",
          "/streams/s/events",
          { body: "name=x", headers: { "content-type": "application/x-www-form-urlencoded" } },
        ],
      ],
      [413, ["POST", "/streams/s/events", { body: { events: [{ name: "Big", data: "x".repeat(50_000) }] } }]],
      [400, ["GET", "/events?after=-1"]],
      [400, ["GET", "/streams/s?limit=abc"]],
      [400, ["GET", "/subscriptions/greeter/keys?status=sleeping"]],
      [404, ["GET", "/subscriptions/nope"]],
      [404, ["POST", "/consume/nope"]],
      [404, ["GET", "/no-such-route"]],
    ];
    for (const [status, args] of cases) {
      const response = await api(...args);
      expect(response.status, `${args[0]} ${args[1]}`).toBe(status);
      expectProblem(response, status);
    }
    // deep nesting is refused before the body is parsed (src/http/jsonNesting.ts)
    const nested = `{"events":[{"name":"E","data":${"[".repeat(15_000)}${"]".repeat(15_000)}}]}`;
    const deep = await api("POST", "/streams/s/events", { body: nested });
    expectProblem(deep, 400);
    expect(deep.json.detail).toMatch(/nests deeper than \d+ levels/);
    expect(await count("events")).toBe(before);
  });
});

describe("auth", () => {
  it("refuses admin endpoints without or with a wrong token, changing nothing", async () => {
    const before = await count("events");
    for (const token of [null, "wrong", ""]) {
      for (const [method, path] of [
        ["GET", "/stats"],
        ["GET", "/subscriptions"],
        ["POST", "/advance"],
        ["GET", "/dead-letters"],
        ["POST", "/streams/s/events"],
        ["POST", "/subscriptions/greeter/pause"],
      ] as const) {
        expectProblem(
          await api(method, path, {
            token,
            body: method === "POST" ? { events: [{ name: "E", data: {} }] } : undefined,
          }),
          401,
        );
        refusedByAuth++;
      }
    }
    expect(await count("events")).toBe(before);
    expect((await api("GET", "/subscriptions/greeter")).json.paused).toBe(false);
  });
});

describe("metrics", () => {
  it("GET /metrics answers Prometheus text to a token with the read scope only", async () => {
    expectProblem(await api("GET", "/metrics", { token: null }), 401);
    refusedByAuth++;
    const append = (await api("POST", "/tokens", { body: { name: "producer", scopes: ["append"] } })).json.token;
    expectProblem(await api("GET", "/metrics", { token: append }), 403);
    const read = (await api("POST", "/tokens", { body: { name: "prometheus", scopes: ["read"] } })).json.token;
    const response = await fetch(`${state.stack.url}/metrics`, { headers: { authorization: `Bearer ${read}` } });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/plain; version=0.0.4");
    const text = await response.text();
    for (const name of ["greeter", "room-occupancy", "visitor-directory"]) {
      expect(text).toMatch(new RegExp(`^corq_subscription_lag_events\\{subscription="${name}"\\} \\d+$`, "m"));
      expect(text).toMatch(new RegExp(`^corq_subscription_keys\\{subscription="${name}",state="dead"\\} 0$`, "m"));
    }
    // the first test's deliveries were acked and counted (a drain records its batches within a second)
    expect(text).toMatch(/^# TYPE corq_batch_duration_seconds histogram$/m);
    await eventually(async () => {
      const again = await (
        await fetch(`${state.stack.url}/metrics`, { headers: { authorization: `Bearer ${read}` } })
      ).text();
      expect(again).toMatch(/^corq_acked_events_total\{subscription="room-occupancy"\} [1-9]\d*$/m);
    });
  });
});

describe("paging: keys and the log tail, by cursor", () => {
  it("pages a subscription's keys with `next`, with and without a status filter, to the last page", async () => {
    // a paused push subscription: its keys stay queued while the test pages them
    const put = await api("PUT", "/subscriptions/paging", {
      body: { events: ["Paged"], key: "data.k", from: "now", deliver: { url: "http://127.0.0.1:9/" } },
    });
    expect(put.status).toBe(201);
    await setPaused("paging", true);
    const keys = ["p-1", "p-2", "p-3", "p-4", "p-5", "p-6", "p-7"];
    for (const k of keys) await appendQuietly(`paging-${k}`, { name: "Paged", data: { k } });
    await api("POST", "/advance");
    for (const k of ["p-2", "p-5"])
      expect((await api("POST", `/subscriptions/paging/keys/${k}/pause`)).status).toBe(200);

    /** Every page from the first, following `next`: the keys of each page. */
    async function pages(query: string) {
      const seen: string[][] = [];
      let next: string | null = null;
      do {
        const cursor: string = next === null ? "" : `&after=${encodeURIComponent(next)}`;
        const page = await api("GET", `/subscriptions/paging/keys?${query}${cursor}`);
        expect(page.status).toBe(200);
        seen.push(page.json.keys.map((k: { key: string }) => k.key));
        next = page.json.next;
        if (next !== null) expect(next).toBe(seen.at(-1)?.at(-1));
      } while (next !== null && seen.length < 20);
      return seen;
    }
    expect(await pages("limit=3")).toEqual([["p-1", "p-2", "p-3"], ["p-4", "p-5", "p-6"], ["p-7"]]);
    // a full last page says there is no next one (no empty page after it)
    expect(await pages("limit=7")).toEqual([keys]);
    expect(await pages("status=ready&limit=2")).toEqual([["p-1", "p-3"], ["p-4", "p-6"], ["p-7"]]);
    expect(await pages("status=paused&limit=1")).toEqual([["p-2"], ["p-5"]]);
    expect(await pages("status=dead&limit=5")).toEqual([[]]);
    expect((await api("DELETE", "/subscriptions/paging")).status).toBe(204);
  });

  it("pages the log tail newest first with `next` as `before`, to the beginning of the log", async () => {
    for (let i = 0; i < 5; i++) await appendQuietly("paging-tail", { name: "Tailed", data: { i } });
    const { rows } = await state.db.query("SELECT position FROM corq.events ORDER BY position DESC");
    const all = rows.map((r: { position: string }) => Number(r.position));
    expect(all.length).toBeGreaterThan(8);
    const seen: number[] = [];
    let next: number | null = null;
    let requests = 0;
    do {
      const page = await api("GET", `/events/tail?limit=4${next === null ? "" : `&before=${next}`}`);
      expect(page.status).toBe(200);
      const positions = page.json.events.map((e: { position: number }) => e.position);
      expect(positions.length).toBeLessThanOrEqual(4);
      seen.push(...positions);
      next = page.json.next;
      if (next !== null) expect(next).toBe(positions.at(-1));
    } while (next !== null && ++requests < 100);
    expect(seen).toEqual(all);
    const newest = await api("GET", "/events/tail?limit=1");
    expect(newest.json.events[0]).toMatchObject({ stream: "paging-tail", name: "Tailed", data: { i: 4 } });
  });

  it("a bad cursor or limit is a 400 problem, never a 500", async () => {
    for (const path of [
      "/events/tail?before=abc",
      "/events/tail?before=0",
      "/events/tail?before=-5",
      "/events/tail?before=1e3",
      "/events/tail?limit=0",
      "/events/tail?limit=100000",
      `/subscriptions/greeter/keys?after=${"x".repeat(1001)}`,
      "/subscriptions/greeter/keys?after=a%00b",
      "/subscriptions/greeter/keys?limit=0",
      "/subscriptions/greeter/keys?limit=abc",
    ]) {
      expectProblem(await api("GET", path), 400);
    }
    // a cursor past the end is an empty last page
    expect((await api("GET", "/events/tail?before=1")).json).toEqual({ events: [], next: null });
  });

  it("a number beyond what its column holds is a 400 problem, never a 500", async () => {
    const cases: Parameters<typeof api>[] = [
      ["GET", "/streams/s?from=2147483648"], // a version is an int4
      ["GET", "/events?after=9007199254740992"], // a position is read as a JSON number
      ["POST", "/dispatch", { headers: { "corq-after-horizon": "99999999999999999999" } }], // xid8: < 2^64
      ["POST", "/dispatch", { headers: { "corq-after-horizon": "18446744073709551616" } }],
      ["POST", "/consume/greeter", { headers: { "corq-slot": "2147483648" } }], // slots 1..1000
      ["POST", "/consume/greeter", { headers: { "corq-slot": "0" } }],
      ["POST", "/consume/greeter", { headers: { "corq-budget-ms": "999999999999999" } }],
    ];
    for (const args of cases) {
      const response = await api(...args);
      expect(response.status, `${args[0]} ${args[1]} ${JSON.stringify(args[2] ?? {})}`).toBe(400);
      expectProblem(response, 400);
    }
    // the largest values that are allowed answer
    expect((await api("GET", "/streams/s?from=2147483647")).status).toBe(200);
  });
});

describe("subscriptions, driving and dead letters", () => {
  it("resuming a subscription, or one key, delivers what waited at once: no cron, no other append", async () => {
    const pendingOf = async (key: string) =>
      (
        await state.db.query(
          `SELECT k.pending, k.paused_at IS NOT NULL AS paused FROM corq.keys k JOIN corq.subscriptions s ON s.id = k.subscription_id
           WHERE s.name = 'visitor-directory' AND k.key = $1`,
          [key],
        )
      ).rows;
    const nameOf = async (stream: string) =>
      (await state.db.query("SELECT name FROM example.visitors WHERE stream = $1", [stream])).rows;
    // behind the API's back: an append over HTTP kicks a dispatch of its own, which could still be
    // at work when the subscription is resumed
    const register = (stream: string, name: string) => appendQuietly(stream, { name: "Registered", data: { name } });

    // the whole subscription
    await api("POST", "/subscriptions/visitor-directory/pause");
    await register("visitor-wake-1", "Wes");
    await api("POST", "/advance");
    expect(await pendingOf("visitor-wake-1")).toEqual([{ pending: 1, paused: false }]);
    expect(await nameOf("visitor-wake-1")).toEqual([]);
    expect((await api("POST", "/subscriptions/visitor-directory/resume")).status).toBe(200);
    await eventually(async () => expect(await nameOf("visitor-wake-1")).toEqual([{ name: "Wes" }]));

    // one key
    const key = "/subscriptions/visitor-directory/keys/visitor-wake-2";
    expect((await api("POST", `${key}/pause`)).status).toBe(200);
    await register("visitor-wake-2", "Vi");
    await api("POST", "/advance");
    expect(await pendingOf("visitor-wake-2")).toEqual([{ pending: 1, paused: true }]);
    expect(await nameOf("visitor-wake-2")).toEqual([]);
    expect((await api("POST", `${key}/resume`)).status).toBe(200);
    await eventually(async () => expect(await nameOf("visitor-wake-2")).toEqual([{ name: "Vi" }]));
  });

  it("a delayed event over HTTP: kept with its time, its key waits (and says so), then it goes", async () => {
    const stream = "visitor-later-1";
    const visitor = async () =>
      (await state.db.query("SELECT name FROM example.visitors WHERE stream = $1", [stream])).rows;
    const appended = await api("POST", `/streams/${stream}/events`, {
      body: { events: [{ name: "Registered", data: { name: "Lou" }, delayMs: 4000 }] },
    });
    expect(appended.status).toBe(201);
    const read = await api("GET", `/streams/${stream}`);
    const deliverAt = Date.parse(read.json.events[0].deliverAt);
    expect(deliverAt - Date.now()).toBeGreaterThan(2000);
    await api("POST", "/advance");
    expect((await api("POST", "/consume/visitor-directory")).status).toBe(204); // nothing due
    // the page that starts just before it ("visitor-later-0" sorts right before it)
    const page = await api("GET", "/subscriptions/visitor-directory/keys?after=visitor-later-0&limit=1");
    const [key] = page.json.keys;
    expect(key).toMatchObject({ key: stream, status: "backoff", pending: 1, attempts: 0 });
    expect(Date.parse(key.availableAt)).toBe(deliverAt);
    expect(key.reason).toMatch(/^waiting until .* for a delayed event/);
    expect(await visitor()).toEqual([]);
    // its time comes: the next consume (the cron's, a kick's, or this one) delivers it, not before
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, deliverAt - Date.now())));
    await eventually(async () => {
      await api("POST", "/consume/visitor-directory");
      expect(await visitor()).toEqual([{ name: "Lou" }]);
    });
  });

  it("lists subscriptions with stats, pauses and resumes, pages keys", async () => {
    // consumers run in the background (serve's always, the Worker's after a kick): the earlier
    // tests' last batches may still be leased when the list is first read
    const list = await eventually(async () => {
      const listed = await api("GET", "/subscriptions");
      expect(listed.json.subscriptions[0].keys.leased).toBe(0);
      return listed;
    });
    expect(list.json.subscriptions.map((s: { name: string }) => s.name)).toEqual([
      "greeter",
      "room-occupancy",
      "visitor-directory",
    ]);
    expect(list.json.subscriptions[0]).toMatchObject({
      watermark: expect.any(Number),
      lag: expect.any(Number),
      pending: expect.any(Number),
      keys: { ready: expect.any(Number), leased: 0, backoff: 0, dead: 0 },
      paused: false,
    });
    expect((await api("POST", "/subscriptions/greeter/pause")).json).toMatchObject({ name: "greeter", paused: true });
    expect((await api("POST", "/subscriptions/greeter/resume")).json).toMatchObject({ name: "greeter", paused: false });
    const keys = await api("GET", "/subscriptions/visitor-directory/keys?limit=10");
    expect(keys.json.keys[0]).toMatchObject({
      key: expect.any(String),
      status: expect.any(String),
      pending: expect.any(Number),
      attempts: 0,
      lastPosition: expect.any(Number),
    });
    const stats = await api("GET", "/stats");
    expect(stats.json.log).toMatchObject({ head: expect.any(Number), events: expect.any(Number) });
  });

  it("advances and consumes on request", async () => {
    await api("POST", "/subscriptions/visitor-directory/pause");
    await appendQuietly("visitor-cy", { name: "Registered", data: { name: "Cy" } });
    const advanced = await api("POST", "/advance");
    expect(advanced.status).toBe(200);
    expect(advanced.json.advanced).toHaveProperty("visitor-directory");
    expect(await api("POST", "/consume/visitor-directory")).toMatchObject({ status: 204 }); // paused
    await setPaused("visitor-directory", false);
    const consumed = await api("POST", "/consume/visitor-directory");
    // npm run serve's own consumers may be first: the advance above woke them, and once idle
    // they look for keys that came due in the last moments (src/node/runner.ts, nextDue's
    // recentMs), which the resumed subscription's key is
    if (!(runtime === "serve" && consumed.status === 204)) {
      expect(consumed).toMatchObject({ status: 200, json: { key: "visitor-cy", events: 1, outcome: "acked" } });
    }
    await eventually(async () => {
      const { rows } = await state.db.query("SELECT name, status FROM example.visitors WHERE stream = 'visitor-cy'");
      expect(rows).toEqual([{ name: "Cy", status: "registered" }]);
    });
    expect((await api("POST", "/consume/visitor-directory")).status).toBe(204);
  });

  it("lists dead letters and releases them by admin token or a signed webhook only", async () => {
    await api("POST", "/subscriptions/visitor-directory/pause");
    await appendQuietly("visitor-dee", { name: "Registered", data: { name: "Dee" } });
    await api("POST", "/advance");
    // a key that failed its last attempt (the failure path itself is covered by the library tests)
    await state.db.query(
      `UPDATE corq.keys SET dead_at = now(), available_at = NULL, attempts = 5, last_error = 'Error: boom',
         failed_position = (SELECT max(position) FROM corq.events WHERE stream = 'visitor-dee')
       WHERE key = 'visitor-dee' AND subscription_id = (SELECT id FROM corq.subscriptions WHERE name = 'visitor-directory')`,
    );
    await api("POST", "/subscriptions/visitor-directory/resume");
    const list = await api("GET", "/dead-letters?subscription=visitor-directory");
    expect(list.json.deadLetters).toEqual([
      {
        subscription: "visitor-directory",
        key: "visitor-dee",
        position: expect.any(Number),
        attempts: 5,
        lastError: "Error: boom",
        deadAt: expect.any(String),
      },
    ]);
    expect((await api("POST", "/consume/visitor-directory")).status).toBe(204); // dead: not handed out
    await setPaused("visitor-directory", true); // released below, consumed by this test

    const body = JSON.stringify({ subscription: "visitor-directory", key: "visitor-dee", mode: "retry" });
    const now = Math.floor(Date.now() / 1000);
    const signed = async (secret: string, timestamp = now, payload = body, id = "msg_1") => ({
      "webhook-id": id,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": await sign(secret, { id, timestamp, body: payload }),
    });
    const refused: Record<string, string>[] = [
      {},
      await signed("wrong-secret"),
      await signed(state.stack.webhookSecret, now - 600),
      await signed(state.stack.webhookSecret, now, body.replace("retry", "skip")), // signed another body
    ];
    for (const headers of refused) {
      expectProblem(await api("POST", "/dead-letters/retry", { token: null, body, headers }), 401);
      refusedByAuth++;
    }
    expect((await api("GET", "/dead-letters")).json.deadLetters).toMatchObject([{ key: "visitor-dee" }]);

    const headers = await signed(state.stack.webhookSecret);
    const released = await api("POST", "/dead-letters/retry", { token: null, body, headers });
    expect(released).toMatchObject({ status: 200, json: { released: 1 } });
    // the same signed request again (a replay, within the timestamp window) is refused
    expectProblem(await api("POST", "/dead-letters/retry", { token: null, body, headers }), 409);
    refusedByAuth++;
    // rotation: the second secret is accepted too, under a new webhook id
    const rotated = await signed("rotated-secret", now, body, "msg_2");
    expect(await api("POST", "/dead-letters/retry", { token: null, body, headers: rotated })).toMatchObject({
      status: 200,
      json: { released: 0 },
    });
    expect((await api("GET", "/dead-letters")).json.deadLetters).toHaveLength(0);
    await setPaused("visitor-directory", false);
    const consumed = await api("POST", "/consume/visitor-directory");
    // npm run serve's own consumers may be first: every API write (the releases above) wakes them
    if (!(runtime === "serve" && consumed.status === 204)) {
      expect(consumed).toMatchObject({ status: 200, json: { key: "visitor-dee", outcome: "acked" } });
    }
    await eventually(async () => {
      const { rows } = await state.db.query("SELECT name FROM example.visitors WHERE stream = 'visitor-dee'");
      expect(rows).toEqual([{ name: "Dee" }]);
    });
    // the admin token works too; nothing left to release
    expect((await api("POST", "/dead-letters/retry", { body: { subscription: "visitor-directory" } })).json).toEqual({
      released: 0,
    });
    expectProblem(
      await api("POST", "/dead-letters/retry", { body: { subscription: "visitor-directory", mode: "later" } }),
      400,
    );
  });
});

describe("push URLs below the admin scope", () => {
  it("a read or operate token sees each push URL as scheme and host only (GET and what pause and resume answer); admin sees it whole", async () => {
    // (a URL with a user name or password is refused at PUT); a relay carries its capability in the path
    const urls = {
      "hook-query": "https://receiver.example.com/hook?token=s3cret-one&team=blue",
      "hook-repeated": "https://other.example.com:8443/in?key=s3cret-two&key=s3cret-three",
      "hook-relay": "https://hooks.relay.example/hooks/catch/4711/s3cret-capability/",
    };
    const redacted = ["https://hooks.relay.example", "https://other.example.com:8443", "https://receiver.example.com"];
    for (const [name, url] of Object.entries(urls)) {
      const put = await api("PUT", `/subscriptions/${name}`, {
        body: { events: ["NeverAppended"], from: "now", deliver: { url } },
      });
      expect(put.status).toBe(201);
    }
    const read = (await api("POST", "/tokens", { body: { name: "viewer", scopes: ["read"] } })).json.token;
    const operate = (await api("POST", "/tokens", { body: { name: "operator", scopes: ["operate"] } })).json.token;
    const mine = (s: { name: string }) => s.name in urls;
    const seenUrls = (seen: { deliver: { url: string } }[]) => seen.map((s) => s.deliver.url).sort();
    for (const token of [read, operate]) {
      expect(seenUrls((await api("GET", "/subscriptions", { token })).json.subscriptions.filter(mine))).toEqual(
        redacted,
      );
      expect(seenUrls((await api("GET", "/stats", { token })).json.subscriptions.filter(mine))).toEqual(redacted);
      const one = await Promise.all(
        Object.keys(urls).map(async (name) => (await api("GET", `/subscriptions/${name}`, { token })).json),
      );
      expect(seenUrls(one)).toEqual(redacted);
    }
    const acted = [];
    for (const name of Object.keys(urls)) {
      for (const action of ["pause", "resume"]) {
        const answer = await api("POST", `/subscriptions/${name}/${action}`, { token: operate });
        expect(answer.status).toBe(200);
        acted.push(answer.json);
      }
    }
    expect(seenUrls(acted)).toEqual(redacted.flatMap((url) => [url, url]));
    expect(JSON.stringify(acted)).not.toContain("s3cret");
    const asAdmin = (await api("GET", "/subscriptions")).json.subscriptions.filter(mine);
    expect(seenUrls(asAdmin)).toEqual(Object.values(urls).sort());
    for (const name of Object.keys(urls)) expect((await api("DELETE", `/subscriptions/${name}`)).status).toBe(204);
  });
});
