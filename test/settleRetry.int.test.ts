// A dropped connection costs a retry, not a lease (issue 48 item 2, DESIGN invariant 14). A
// settlement — consume()'s ack, a drain's settle+claim — is lease-fenced, so when its connection
// is terminated (57P01) it is sent again, alone, on a new connection while the lease holds: the
// batch is acked, the key's next batch comes at once (not after leaseMs), nothing is delivered
// twice. Past the lease it gives up with one warning and the lease expires as before. The
// consumer's statements go through a proxy (test/helpers/terminatingProxy.ts) that answers the
// chosen statement with FATAL 57P01 in place of passing it on. Before the retry, consume() and
// drain() rejected with database_unavailable and the key waited out its 30 s lease.
import { afterEach, describe, expect, it, vi } from "vitest";
import { createCorq, CorqError, type Corq, type Handler } from "../src/index.js";
import { isTransient } from "../src/errors.js";
import { useCorq } from "./helpers/corq.js";
import { startTerminatingProxy, type TerminatingProxy } from "./helpers/terminatingProxy.js";
import { within } from "./helpers/until.js";

const open = useCorq();
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

// consume()'s ack (ackBatch: its activity row, then the throughput counter) and a drain's settle+claim (settleCtes)
const ACK = /\brecorded AS \([\s\S]*counted AS \(/;
const SETTLE = /\bsettle AS \(/;

/** One subscription, one event per batch; its handler records what it was given. */
async function setUp(leaseMs: number) {
  const delivered: string[] = [];
  const handle: Handler = async (events, ctx) => {
    for (const event of events) delivered.push(`${ctx.key}:${event.position}`);
  };
  const subscriptions = [{ name: "settled", batchSize: 1, leaseMs, handle }];
  const opened = await open({ subscriptions });
  const proxy: TerminatingProxy = await startTerminatingProxy(opened.url);
  closers.push(() => proxy.close());
  // the consumer's statements go through the proxy; the test's own appends and advances do not
  const consumer: Corq = createCorq({ databaseUrl: proxy.url, subscriptions });
  closers.push(() => consumer.close());
  const keyRow = async (key: string) =>
    (
      await opened.raw.query(
        "SELECT lease_token, pending, attempts, last_error FROM corq.keys WHERE key = $1 AND subscription_id = (SELECT id FROM corq.subscriptions WHERE name = 'settled')",
        [key],
      )
    ).rows[0];
  return { ...opened, proxy, consumer, delivered, keyRow };
}

describe("a settlement whose connection is terminated (57P01)", () => {
  it("consume(): the ack is sent again on a new connection; the key's next batch comes at once, none twice", async () => {
    const { corq, proxy, consumer, delivered, keyRow } = await setUp(30_000);
    await corq.append("k", [
      { name: "E", data: {} },
      { name: "E", data: {} },
    ]);
    await corq.advance();
    proxy.terminateStatements(ACK);
    const first = await consumer.consume("settled");
    expect(proxy.terminated()).toBe(1);
    expect(first).toMatchObject({ key: "k", events: 1, outcome: "acked" });
    const started = Date.now();
    const second = await within(consumer.consume("settled"), { timeoutMs: 5000, message: "the second consume" });
    expect(second).toMatchObject({ key: "k", events: 1, outcome: "acked" });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(await consumer.consume("settled")).toBeNull();
    expect(delivered).toEqual(["k:1", "k:2"]);
    expect(await keyRow("k")).toMatchObject({ lease_token: null, pending: 0, attempts: 0 });
  });

  it("drain(): the settle is sent again alone and the drain goes on: every batch once, none after the lease", async () => {
    const { corq, proxy, consumer, delivered, keyRow } = await setUp(30_000);
    await corq.append("k", [
      { name: "E", data: {} },
      { name: "E", data: {} },
    ]);
    await corq.append("j", [{ name: "E", data: {} }]);
    await corq.advance();
    proxy.terminateStatements(SETTLE);
    const started = Date.now();
    const result = await within(consumer.drain("settled", { keysPerClaim: 1 }), {
      timeoutMs: 10_000,
      message: "the drain",
    });
    expect(proxy.terminated()).toBe(1);
    expect(result).toMatchObject({ batches: 3, events: 3 });
    expect(Date.now() - started).toBeLessThan(2000);
    expect([...delivered].sort()).toEqual(["j:3", "k:1", "k:2"]);
    for (const key of ["k", "j"]) expect(await keyRow(key)).toMatchObject({ lease_token: null, pending: 0 });
  });

  it("past the lease it gives up with one warning; the batch comes again after the lease, as before", async () => {
    const leaseMs = 2000;
    const { corq, proxy, consumer, delivered, keyRow } = await setUp(leaseMs);
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    await corq.append("k", [{ name: "E", data: {} }]);
    await corq.advance();
    proxy.terminateStatements(ACK, Number.POSITIVE_INFINITY);
    const started = Date.now();
    const outcome = await within(
      consumer.consume("settled").then(
        () => "settled",
        (error: unknown) => error,
      ),
      { timeoutMs: 5000, message: "retries past the lease" },
    );
    expect(outcome).toBeInstanceOf(CorqError);
    expect(outcome).toMatchObject({ code: "database_unavailable" });
    // retried, and stopped about when the lease ends (the last attempt starts a tenth of it,
    // 200 ms, short of its end; the slack is for a loaded machine's last round trip)
    expect(proxy.terminated()).toBeGreaterThan(3);
    expect(Date.now() - started).toBeLessThan(leaseMs + 500);
    expect(warn.mock.calls.filter(([line]) => /within the lease/.test(String(line)))).toHaveLength(1);
    proxy.terminateStatements(ACK, 0);
    expect(await keyRow("k")).toMatchObject({ lease_token: expect.any(String), pending: 1 });
    expect(await consumer.consume("settled")).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, leaseMs - (Date.now() - started) + 100));
    expect(await consumer.consume("settled")).toMatchObject({ key: "k", outcome: "acked" });
    expect(delivered).toEqual(["k:1", "k:1"]);
  });
});

describe("isTransient: the one table of errors a settlement is sent again for", () => {
  const pgError = (code: string, message = "x") => Object.assign(new Error(message), { code });
  it.each([
    ["57P01 admin_shutdown", pgError("57P01"), true],
    ["57P03 cannot_connect_now", pgError("57P03"), true],
    ["08006 connection_failure", pgError("08006"), true],
    ["53300 too_many_connections", pgError("53300"), true],
    ["ECONNRESET", pgError("ECONNRESET", "read ECONNRESET"), true],
    ["Neon: couldn't connect to compute", new Error("couldn't connect to compute node"), true],
    ["Neon HTTP 503", new Error("Server error (HTTP status 503): x"), true],
    ["wrapped as database_unavailable", new CorqError("database_unavailable", "x", { cause: pgError("57P01") }), true],
    ["28P01 wrong password", pgError("28P01", "password authentication failed"), false],
    ["3D000 no such database", pgError("3D000", 'database "x" does not exist'), false],
    ["57014 query_canceled", pgError("57014"), false],
    ["23505 unique_violation", pgError("23505"), false],
    ["40P01 deadlock (not a connection error: neverCommitted lets it be sent again)", pgError("40P01"), false],
    ["Neon HTTP 429 (its rate limit)", new Error("Server error (HTTP status 429): x"), true],
    ["Neon HTTP 507 (over its size limit)", new Error("Server error (HTTP status 507): x"), false],
    ["a CorqError of another code", new CorqError("conflict", "x"), false],
  ])("%s → %s", (_, error, expected) => {
    expect(isTransient(error)).toBe(expected);
  });
});
