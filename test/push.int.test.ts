// Push subscriptions delivering to a real local HTTP receiver.
import { createServer, type AddressInfo, type Socket } from "node:net";
import { lookup } from "node:dns/promises";
import { hostname } from "node:os";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { useCorq, sleep } from "./helpers/corq.js";
import { firstDeliveries, startReceiver } from "./helpers/receiver.js";
import { reportScenario, tally } from "./helpers/chaos.js";
import { present } from "./helpers/present.js";

const openCorq = useCorq();
// the receivers listen on 127.0.0.1: these tests allow private destinations, explicitly
const local = { pushAllowPrivate: true };
const open = (options: Parameters<typeof openCorq>[0] = {}) => openCorq({ ...local, ...options });
let secret: string | undefined;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
beforeAll(async () => (receiver = await startReceiver(() => secret)));
afterAll(() => receiver.close());
beforeEach(() => receiver.reset());

const push = (extra: Record<string, unknown> = {}) => ({
  deliver: { url: receiver.url, timeoutMs: 2000 },
  ...extra,
});

/** Consume with `n` concurrent consumers until nothing is ready for `quietMs`; fails after `timeoutMs`. */
async function consumeAll(
  corq: { consume(name: string): Promise<unknown> },
  name: string,
  n = 1,
  quietMs = 0,
  timeoutMs = 15_000,
) {
  const deadline = Date.now() + timeoutMs;
  await Promise.all(
    Array.from({ length: n }, async () => {
      let idleSince = Date.now();
      for (;;) {
        if (Date.now() > deadline) throw new Error(`"${name}" still had batches ready after ${timeoutMs} ms`);
        if ((await corq.consume(name)) !== null) idleSince = Date.now();
        else if (Date.now() - idleSince >= quietMs) return;
        else await sleep(10);
      }
    }),
  );
}

describe("push subscriptions", () => {
  it("delivers every event of every key, per key in order, signed, one in-flight delivery per key", async () => {
    const { corq, another } = await open({ poolSize: 10 });
    const expected = new Map<string, number[]>();
    for (let round = 0; round < 5; round++) {
      const events = Array.from({ length: 40 }, (_, r) => ({ name: "Arrived", data: { roomId: `room-${r}`, round } }));
      const { positions } = await corq.append(`visitors-${round % 2}`, events);
      for (const [r, p] of positions.entries()) expected.set(`room-${r}`, [...(expected.get(`room-${r}`) ?? []), p]);
    }
    const created = await corq.putSubscription("rooms-hook", push({ key: "data.roomId", batchSize: 3 }));
    expect(created.created).toBe(true);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    secret = created.secret;
    expect(created.subscription).toMatchObject({
      name: "rooms-hook",
      kind: "push",
      key: "data.roomId",
      deliver: { url: receiver.url, timeoutMs: 2000 },
    });
    expect(JSON.stringify(created.subscription)).not.toContain(created.secret);

    expect(await corq.advance()).toEqual({ "rooms-hook": 200 });
    receiver.behave(() => ({ delayMs: Math.random() * 5 }));
    const consumers = Array.from({ length: 8 }, () => another({ ...local, poolSize: 1 }));
    await Promise.all(consumers.map((c) => consumeAll(c, "rooms-hook")));

    expect(receiver.overlaps).toBe(0);
    expect(receiver.deliveries.every((d) => d.signatureValid)).toBe(true);
    expect(firstDeliveries(receiver.deliveries)).toEqual(expected);
    const first = present(receiver.deliveries[0], "the first delivery");
    expect(first).toMatchObject({
      subscription: "rooms-hook",
      incarnation: (await corq.subscription("rooms-hook")).incarnation,
      attempt: 1,
      id: expect.stringMatching(/^msg_[0-9a-f]{32}$/),
    });
    expect(first.events[0]).toEqual({
      position: expect.any(Number),
      stream: expect.any(String),
      version: expect.any(Number),
      name: "Arrived",
      data: expect.any(Object),
      meta: {},
      createdAt: expect.any(String),
      seq: 1,
      replay: false,
    });
    expect(Math.abs(first.timestamp - Date.now() / 1000)).toBeLessThan(60);
    expect(await corq.subscription("rooms-hook")).toMatchObject({
      pending: 0,
      keys: { ready: 0, leased: 0, backoff: 0, dead: 0 },
    });
  });

  it("replays the existing log with from: beginning, and not with from: now", async () => {
    const { corq } = await open();
    await corq.append("old", [{ name: "E", data: {} }]);
    secret = (await corq.putSubscription("replay", push({ from: "beginning" }))).secret;
    const now = await corq.putSubscription(
      "fresh",
      push({ from: "now", deliver: { url: receiver.url, secret: secret! } }),
    );
    expect(now.secret).toBe(secret); // a caller-chosen secret
    await corq.append("new", [{ name: "E", data: {} }]);
    expect(await corq.advance()).toEqual({ replay: 2, fresh: 1 });
    await consumeAll(corq, "replay");
    await consumeAll(corq, "fresh");
    const streams = (name: string) => receiver.deliveries.filter((d) => d.subscription === name).map((d) => d.key);
    expect(streams("replay").sort()).toEqual(["new", "old"]);
    expect(streams("fresh")).toEqual(["new"]);
  });

  it("retries a failing key with backoff, dead-letters it alone, and resumes it in order on retry or skip", async () => {
    const { corq } = await open();
    secret = (
      await corq.putSubscription("p", push({ maxAttempts: 3, backoff: { initialMs: 30, maxMs: 100, factor: 2 } }))
    ).secret;
    const poison = await corq.append("poison", [
      { name: "E", data: { n: 1 } },
      { name: "E", data: { n: 2 } },
      { name: "E", data: { n: 3 } },
    ]);
    for (let i = 0; i < 10; i++) await corq.append(`ok-${i}`, [{ name: "E", data: {} }]);
    await corq.advance();
    let failing = true;
    receiver.behave((d) =>
      d.key === "poison" && failing
        ? { status: 503, body: { error: "down", detail: "receiver's own words" } }
        : undefined,
    );
    await consumeAll(corq, "p", 2, 400);
    expect((await corq.subscription("p")).keys).toMatchObject({ dead: 1, ready: 0, backoff: 0 });
    const attempts = receiver.deliveries.filter((d) => d.key === "poison");
    expect(attempts.map((d) => d.attempt)).toEqual([1, 2, 3]);
    // the retries carry the head event alone, under the first attempt's webhook-id
    expect(attempts.map((d) => d.events.length)).toEqual([3, 1, 1]);
    expect(new Set(attempts.map((d) => d.id)).size).toBe(1);
    const otherKeysDone = new Set(receiver.deliveries.filter((d) => d.key.startsWith("ok-")).map((d) => d.key)).size;
    expect(otherKeysDone).toBe(10);
    const [dead] = await corq.deadLetters({ subscription: "p" });
    expect(dead).toMatchObject({
      key: "poison",
      position: poison.positions[0],
      attempts: 3,
      lastError: "Error: HTTP 503",
    });

    // skip the head, then the receiver recovers: 2 and 3 follow in order
    failing = false;
    receiver.reset();
    expect(await corq.releaseDeadLetters({ subscription: "p", key: "poison", mode: "skip" })).toEqual({ released: 1 });
    await consumeAll(corq, "p");
    expect(firstDeliveries(receiver.deliveries).get("poison")).toEqual(poison.positions.slice(1));
    // a new first event, a new attempt series
    expect(receiver.deliveries.find((d) => d.key === "poison")?.id).not.toBe(
      present(attempts[0], "the first attempt").id,
    );
    reportScenario({
      scenario: "poison event",
      ...tally(
        new Map([["poison", poison.positions.slice(1)]]),
        receiver.deliveries.flatMap((d) => d.events.map((e) => ({ key: d.key, position: e.position }))),
      ),
      doubleClaims: receiver.overlaps,
      notes: { attempts_before_dead: attempts.length, other_keys_done: otherKeysDone },
    });
  });

  it("counts a timeout and a redirect as failed attempts", async () => {
    const { corq } = await open();
    secret = (
      await corq.putSubscription(
        "slow",
        push({
          maxAttempts: 5,
          deliver: { url: receiver.url, timeoutMs: 150 },
          backoff: { initialMs: 0, maxMs: 0, factor: 1 },
        }),
      )
    ).secret;
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    receiver.behave(() => ({ delayMs: 400 }));
    expect(await corq.consume("slow")).toMatchObject({ outcome: "retry", error: "Error: timeout after 150 ms" });
    receiver.behave(() => ({ status: 302 }));
    expect(await corq.consume("slow")).toMatchObject({ outcome: "retry", error: "Error: HTTP 302" });
    // the deadline covers the body too: headers and half a body in time, the rest too late
    receiver.behave(() => ({ body: { ok: true }, stallMs: 400 }));
    expect(await corq.consume("slow")).toMatchObject({ outcome: "retry", error: "Error: timeout after 150 ms" });
    expect((await corq.subscription("slow")).pending).toBe(1);
  });

  it.each([
    [304, "Error: HTTP 304"],
    [400, "Error: HTTP 400"],
    [404, "Error: HTTP 404"],
    [410, "Error: HTTP 410"],
    [429, "Error: HTTP 429"],
    [102, "Error: could not connect"], // an informational answer with no final one
  ])("counts an answer %i as a failed attempt and keeps the batch queued", async (status, error) => {
    const { corq } = await open();
    secret = (await corq.putSubscription("statuses", push({ maxAttempts: 2 }))).secret;
    await corq.append("k", [
      { name: "E", data: {} },
      { name: "E", data: {} },
    ]);
    await corq.advance();
    receiver.behave(() => ({ status, body: { ok: true } }));
    expect(await corq.consume("statuses")).toMatchObject({ outcome: "retry", events: 2, error });
    expect(await corq.subscription("statuses")).toMatchObject({ pending: 2, keys: { backoff: 1, ready: 0, dead: 0 } });
    expect(receiver.deliveries).toHaveLength(1);
  });

  it("keeps one message for every way a connection fails, so ports cannot be told apart", async () => {
    // a closed port, and ports that reset the connection, hang up after the request, or
    // answer something that is not HTTP
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const sockets = new Set<Socket>();
    const serve = (fn: (socket: Socket) => void) => createServer((socket) => (sockets.add(socket), fn(socket)));
    const listening = [
      serve((socket) => socket.resetAndDestroy()),
      serve((socket) => socket.once("data", () => socket.destroy())),
      serve((socket) => socket.once("data", () => socket.end("SSH-2.0-OpenSSH_9.6\r\n"))),
    ];
    await Promise.all(listening.map((s) => new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve))));
    try {
      const { corq } = await open();
      const ports = [closedPort, ...listening.map((s) => (s.address() as AddressInfo).port)];
      for (const [i, port] of ports.entries()) {
        await corq.putSubscription(`probe-${i}`, {
          maxAttempts: 1,
          deliver: { url: `http://127.0.0.1:${port}/`, timeoutMs: 2000 },
        });
      }
      await corq.append("k", [{ name: "E", data: {} }]);
      await corq.advance();
      for (const i of ports.keys())
        expect(await corq.consume(`probe-${i}`), `port ${i}`).toMatchObject({
          outcome: "dead",
          error: "Error: could not connect",
        });
      const dead = await corq.deadLetters();
      expect(dead.map((d) => d.lastError)).toEqual(ports.map(() => "Error: could not connect"));
    } finally {
      for (const socket of sockets) socket.destroy();
      await Promise.all(listening.map((s) => new Promise((resolve) => s.close(resolve))));
    }
  });

  it("fails a 2xx JSON answer over 64 KiB or that does not parse; other content types ack the batch", async () => {
    const { corq } = await open();
    secret = (
      await corq.putSubscription("bodies", push({ maxAttempts: 100, backoff: { initialMs: 0, maxMs: 0, factor: 1 } }))
    ).secret;
    await corq.advance();
    const big = JSON.stringify({ ok: true, padding: "x".repeat(70_000) });
    const answers: [string, Parameters<typeof receiver.behave>[0], { outcome: string; error?: string }][] = [
      [
        "JSON over 64 KiB",
        () => ({ raw: big }),
        { outcome: "retry", error: "Error: response too large (over 64 KiB)" },
      ],
      [
        "+json over 64 KiB",
        () => ({ raw: big, contentType: "application/vnd.x+json; charset=utf-8" }),
        { outcome: "retry", error: "Error: response too large (over 64 KiB)" },
      ],
      [
        "JSON that does not parse",
        () => ({ raw: '{"ackedThrough": ' }),
        { outcome: "retry", error: "Error: response is not valid JSON" },
      ],
      ["text over 64 KiB", () => ({ raw: big, contentType: "text/plain" }), { outcome: "acked" }],
      ["text that is not JSON", () => ({ raw: "OK", contentType: "text/plain" }), { outcome: "acked" }],
      ["an empty JSON answer", () => ({ raw: "" }), { outcome: "acked" }],
      ["JSON without ackedThrough", () => ({ body: { received: true } }), { outcome: "acked" }],
    ];
    for (const [label, behaviour, expected] of answers) {
      await corq.append("k", [{ name: "E", data: {} }]);
      await corq.advance();
      receiver.behave(behaviour);
      expect(await corq.consume("bodies"), label).toMatchObject(expected);
      expect((await corq.subscription("bodies")).pending, label).toBe(expected.outcome === "acked" ? 0 : 1);
      if (expected.outcome !== "acked") {
        receiver.behave(() => undefined);
        expect(await corq.consume("bodies")).toMatchObject({ outcome: "acked" });
      }
    }
  });

  it("acks a prefix when the receiver answers { ackedThrough } and delivers the rest next", async () => {
    const { corq } = await open();
    secret = (await corq.putSubscription("partial", push())).secret;
    const { positions } = await corq.append(
      "k",
      Array.from({ length: 5 }, () => ({ name: "E", data: {} })),
    );
    await corq.advance();
    receiver.behave((d) =>
      d.events.length > 2 ? { body: { ackedThrough: present(d.events[1], "a second event").position } } : undefined,
    );
    await consumeAll(corq, "partial");
    expect(receiver.deliveries.map((d) => d.events.map((e) => e.position))).toEqual([
      positions,
      positions.slice(2),
      [positions[4]],
    ]);
    // the first delivery of each batch has its own id; nothing was delivered twice
    expect(new Set(receiver.deliveries.map((d) => d.id)).size).toBe(3);
  });

  it("applies a changed filter or key from the current watermark, and deletes with its queue", async () => {
    const { corq, raw } = await open();
    secret = (await corq.putSubscription("evolving", push({ events: ["A"] }))).secret;
    await corq.append("s1", [
      { name: "A", data: { room: "x" } },
      { name: "B", data: { room: "x" } },
    ]);
    await corq.advance();
    const updated = await corq.putSubscription("evolving", push({ events: ["A", "B"], key: "data.room" }));
    expect(updated.created).toBe(false);
    expect(updated.secret).toBeUndefined(); // shown once, at creation; the old one stays in force
    await corq.append("s2", [{ name: "B", data: { room: "x" } }]);
    await corq.advance();
    await consumeAll(corq, "evolving");
    // the A already queued keeps its stream key; the earlier B stays unmatched; the new B goes by room
    expect(receiver.deliveries.map((d) => [d.key, d.events.map((e) => e.name)])).toEqual([
      ["s1", ["A"]],
      ["x", ["B"]],
    ]);
    expect(receiver.deliveries.every((d) => d.signatureValid)).toBe(true);

    await corq.append("s3", [{ name: "A", data: { room: "y" } }]);
    await corq.advance();
    await corq.deleteSubscription("evolving");
    const { rows } = await raw.query(
      "SELECT (SELECT count(*) FROM corq.queue)::int AS q, (SELECT count(*) FROM corq.keys)::int AS k, (SELECT count(*) FROM corq.subscriptions)::int AS s",
    );
    expect(rows[0]).toEqual({ q: 0, k: 0, s: 0 });
    await expect(corq.deleteSubscription("evolving")).rejects.toMatchObject({
      code: "unknown_subscription",
      status: 404,
    });
    await expect(corq.consume("evolving")).rejects.toMatchObject({ code: "unknown_subscription" });
  });

  it("delivers only the events of its stream prefixes (two subscriptions, five streams); an update changes the filter from the watermark", async () => {
    const { corq } = await open();
    const given = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
    secret = given;
    const hook = (extra: Record<string, unknown>) => push({ deliver: { url: receiver.url, secret: given }, ...extra });
    const orders = await corq.putSubscription("orders-feed", hook({ streams: ["orders-", "refunds-"] }));
    expect(orders.subscription).toMatchObject({ streams: ["orders-", "refunds-"] });
    await corq.putSubscription("rooms-feed", hook({ key: "data.room", streams: ["visitor-", "room_"] }));
    for (const stream of ["orders-1", "refunds-2", "visitor-3", "room_4", "roomX4", "ordersX-5"]) {
      await corq.append(stream, [{ name: "E", data: { room: `at-${stream}` } }]);
    }
    expect(await corq.advance()).toEqual({ "orders-feed": 2, "rooms-feed": 2 });
    await consumeAll(corq, "orders-feed");
    await consumeAll(corq, "rooms-feed");
    const got = (name: string) =>
      receiver.deliveries
        .filter((d) => d.subscription === name)
        .map((d) => `${d.key} ${d.events.map((e) => e.stream).join(",")}`)
        .sort();
    expect(got("orders-feed")).toEqual(["orders-1 orders-1", "refunds-2 refunds-2"]);
    expect(got("rooms-feed")).toEqual(["at-room_4 room_4", "at-visitor-3 visitor-3"]);
    expect(receiver.deliveries.every((d) => d.signatureValid)).toBe(true);
    expect(await corq.subscription("rooms-feed")).toMatchObject({ streams: ["visitor-", "room_"], skipped: 0, lag: 0 });

    // PUT replaces the settings: without `streams`, every stream again, from the watermark on
    const updated = await corq.putSubscription("orders-feed", hook({}));
    expect(updated.subscription).toMatchObject({ streams: null });
    await corq.append("visitor-6", [{ name: "E", data: {} }]);
    expect(await corq.advance()).toEqual({ "orders-feed": 1, "rooms-feed": 0 });
  });

  it("derives deliver.timeoutMs from leaseMs when it is omitted: min(10 s, leaseMs / 2), at least 100 ms", async () => {
    const { corq } = await open();
    const timeoutOf = async (leaseMs?: number) =>
      (await corq.putSubscription("derived", { deliver: { url: receiver.url }, ...(leaseMs ? { leaseMs } : {}) }))
        .subscription.deliver?.timeoutMs;
    expect(await timeoutOf()).toBe(10_000); // the default 30 s lease
    expect(await timeoutOf(5000)).toBe(2500);
    expect(await timeoutOf(5001)).toBe(2500);
    expect(await timeoutOf(60_000)).toBe(10_000);
    expect(await timeoutOf(150)).toBe(100);
    // an explicit timeout is kept, and still has to fit in the lease
    expect(
      (await corq.putSubscription("derived", { deliver: { url: receiver.url, timeoutMs: 4000 }, leaseMs: 5000 }))
        .subscription.deliver?.timeoutMs,
    ).toBe(4000);
    await expect(
      corq.putSubscription("derived", { deliver: { url: receiver.url }, leaseMs: 100 }),
    ).rejects.toMatchObject({ code: "invalid_config" });
  });

  it("fails the attempt (no error out of consume) when a stored secret is not valid, as rows from before the PUT check may be", async () => {
    const { corq, raw } = await open();
    await corq.putSubscription("old-row", push({ maxAttempts: 1 }));
    await raw.query(
      `UPDATE corq.subscriptions SET deliver = deliver || '{"secret": "whsec_not*base64!"}' WHERE name = 'old-row'`,
    );
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    expect(await corq.consume("old-row")).toMatchObject({
      outcome: "dead",
      error: "Error: the signing secret is not valid",
    });
    expect(receiver.deliveries).toHaveLength(0);
  });

  it("rejects invalid configurations and names taken by code subscriptions, writing nothing", async () => {
    const { corq, raw } = await open({ subscriptions: [{ name: "in-code", handle: () => undefined }] });
    const bad: unknown[] = [
      {},
      { deliver: { url: "ftp://example.com/x" } },
      { deliver: { url: "not a url" } },
      { deliver: { url: receiver.url, timeoutMs: 5000 }, leaseMs: 5000 },
      { deliver: { url: receiver.url }, key: "payload.x" },
      // a key path is bounded: 32 segments, 512 bytes
      { deliver: { url: receiver.url }, key: ["data", ...Array(32).fill("a")].join(".") },
      { deliver: { url: receiver.url }, key: `data.${"a".repeat(508)}` },
      // a stream filter is 1–100 exact prefixes
      { deliver: { url: receiver.url }, streams: [] },
      { deliver: { url: receiver.url }, streams: [""] },
      { deliver: { url: receiver.url }, streams: ["orders-%"] },
      { deliver: { url: receiver.url }, streams: "orders-" },
      { deliver: { url: receiver.url }, streams: Array.from({ length: 101 }, (_, i) => `p${i}`) },
      { deliver: { url: receiver.url }, batchSize: 0 },
      { deliver: { url: receiver.url }, unknownField: 1 },
      { deliver: { url: receiver.url }, from: "tomorrow" },
      { deliver: { url: "https://user:password@example.com/hook" } },
      { deliver: { url: "https://user@example.com/hook" } },
      { deliver: { url: "https://:password@example.com/hook" } },
      // a whsec_ secret must be base64 of 24 to 64 bytes (Standard Webhooks)
      { deliver: { url: receiver.url, secret: "whsec_not*base64!" } },
      { deliver: { url: receiver.url, secret: `whsec_${Buffer.alloc(8).toString("base64")}` } },
      { deliver: { url: receiver.url, secret: "whsec_" } },
    ];
    for (const input of bad) {
      await expect(corq.putSubscription("hook", input), JSON.stringify(input)).rejects.toMatchObject({
        code: "invalid_config",
        status: 400,
      });
    }
    const good = `whsec_${Buffer.alloc(32, 1).toString("base64")}`;
    expect(
      (await corq.putSubscription("good-secret", push({ deliver: { url: receiver.url, secret: good } }))).secret,
    ).toBe(good);
    await corq.deleteSubscription("good-secret");
    await expect(corq.putSubscription("in-code", push())).rejects.toMatchObject({ code: "conflict", status: 409 });
    await expect(corq.deleteSubscription("in-code")).rejects.toMatchObject({ code: "conflict", status: 409 });
    const { rows } = await raw.query("SELECT name FROM corq.subscriptions");
    expect(rows).toEqual([{ name: "in-code" }]);
  });
});

describe("destinations that are not public", () => {
  // these tests are about the default: nothing allowed, whatever the environment of the run
  let saved: string | undefined;
  beforeAll(() => {
    saved = process.env.CORQ_PUSH_ALLOW_PRIVATE;
    delete process.env.CORQ_PUSH_ALLOW_PRIVATE;
  });
  afterAll(() => {
    if (saved === undefined) delete process.env.CORQ_PUSH_ALLOW_PRIVATE;
    else process.env.CORQ_PUSH_ALLOW_PRIVATE = saved;
  });
  const port = () => new URL(receiver.url).port;
  const loopback = () => [
    `http://127.0.0.1:${port()}/hook`,
    `http://localhost:${port()}/hook`,
    `http://2130706433:${port()}/hook`,
    `http://0x7f.1:${port()}/hook`,
  ];
  const refusal =
    /^Error: destination refused: .+ (is not a public address|resolves to an address that is not public) \(CORQ_PUSH_ALLOW_PRIVATE\)$/;

  it("refuses loopback in all four spellings without CORQ_PUSH_ALLOW_PRIVATE, at PUT and when delivering", async () => {
    const { corq, another } = await openCorq();
    for (const url of loopback()) {
      await expect(corq.putSubscription("probe", { deliver: { url } }), url).rejects.toMatchObject({
        code: "invalid_config",
        status: 400,
        message: expect.stringContaining("is not a public address"),
      });
    }
    // subscriptions made where private networks are allowed (or before this rule) are refused
    // when delivering: nothing reaches the receiver, nothing of it reaches lastError
    const allowing = another({ pushAllowPrivate: true });
    for (const [i, url] of loopback().entries())
      await allowing.putSubscription(`probe-${i}`, { maxAttempts: 1, deliver: { url } });
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    for (const i of loopback().keys()) {
      expect(await corq.consume(`probe-${i}`), loopback()[i]).toMatchObject({
        outcome: "dead",
        error: expect.stringMatching(refusal),
      });
    }
    expect(receiver.deliveries).toEqual([]);
    // the refusal was the rule's: where allowed, the same subscriptions deliver
    for (const i of loopback().keys()) {
      await allowing.releaseDeadLetters({ subscription: `probe-${i}` });
      expect(await allowing.consume(`probe-${i}`)).toMatchObject({ outcome: "acked" });
    }
    expect(receiver.deliveries).toHaveLength(4);
  });

  it("refuses a host name by the address it resolves to, when delivering", async (ctx) => {
    // this machine's own name usually resolves to loopback (/etc/hosts): a name, not "localhost"
    const name = hostname();
    const resolved = await lookup(name, { all: true }).catch(() => []);
    if (resolved.length === 0 || !resolved.every((a) => a.address === "127.0.0.1")) {
      console.warn(`skipped: the host name ${name} does not resolve to 127.0.0.1 only (${JSON.stringify(resolved)})`);
      return ctx.skip();
    }
    const { corq, another } = await openCorq();
    const url = `http://${name}:${port()}/hook`;
    await corq.putSubscription("by-name", { maxAttempts: 1, deliver: { url } }); // the text is a plain name
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    expect(await corq.consume("by-name")).toMatchObject({
      outcome: "dead",
      error: `Error: destination refused: ${name} resolves to an address that is not public (CORQ_PUSH_ALLOW_PRIVATE)`,
    });
    expect(receiver.deliveries).toEqual([]);
    const allowing = another({ pushAllowPrivate: true });
    await allowing.releaseDeadLetters({ subscription: "by-name" });
    expect(await allowing.consume("by-name")).toMatchObject({ outcome: "acked" });
    expect(receiver.deliveries).toHaveLength(1);
  });

  it("allows them with CORQ_PUSH_ALLOW_PRIVATE=true in the environment", async () => {
    process.env.CORQ_PUSH_ALLOW_PRIVATE = "true";
    try {
      const { corq } = await openCorq();
      await corq.putSubscription("allowed", { deliver: { url: loopback()[3] } });
      await corq.append("k", [{ name: "E", data: {} }]);
      await corq.advance();
      expect(await corq.consume("allowed")).toMatchObject({ outcome: "acked" });
    } finally {
      delete process.env.CORQ_PUSH_ALLOW_PRIVATE;
    }
  });
});
