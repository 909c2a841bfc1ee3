// GET /metrics' figures (src/metrics.ts) on real Postgres: the batch-duration histogram kept by
// the trigger on activity (its buckets agree with BATCH_DURATION_BUCKETS), acked events, keys
// by state and the gauges, rendered as Prometheus text; the counters alert rules are written on
// (events appended, batches by outcome, keys dead-lettered, alert sends), each moved by what it
// counts, and none of them going back when the activity record is pruned, housekeeping,
// retention and erasure run, and another subscription is deleted.
import { afterEach, describe, expect, it } from "vitest";
import { BATCH_DURATION_BUCKETS, toPrometheus } from "../src/index.js";
import { useCorq } from "./helpers/corq.js";
import { startReceiver, type Receiver } from "./helpers/receiver.js";

const open = useCorq();
const receivers: Receiver[] = [];
afterEach(async () => {
  for (const receiver of receivers.splice(0)) await receiver.close();
});

/** The samples of a Prometheus text: "name{labels}" → value. */
function samples(text: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    const value = line.slice(at + 1);
    found.set(line.slice(0, at), value === "+Inf" ? Number.POSITIVE_INFINITY : Number(value));
  }
  return found;
}

describe("metrics", () => {
  it("counts each batch into the bucket of the smallest bound at or above its duration (the trigger's list is BATCH_DURATION_BUCKETS)", async () => {
    const { corq, raw } = await open({ subscriptions: [{ name: "timed", handle: () => undefined }] });
    await corq.advance(); // registers the subscription
    const { rows } = await raw.query("SELECT id FROM corq.subscriptions WHERE name = 'timed'");
    const id = rows[0].id;
    const durations = BATCH_DURATION_BUCKETS.flatMap((b) => [b, b + 0.001]);
    // one statement, as the drain records its batches: one upsert per (outcome, bucket)
    await raw.query(
      `INSERT INTO corq.activity (subscription_id, key, started_at, finished_at, events, outcome)
       SELECT $1, 'k', now(), now() + d * interval '1 second', 2, 'acked' FROM unnest($2::float8[]) d`,
      [id, durations],
    );
    const counted = await raw.query(
      "SELECT le, batches::int, events::int FROM corq.batch_durations WHERE subscription_id = $1 ORDER BY le",
      [id],
    );
    const expected = [...BATCH_DURATION_BUCKETS, Number.POSITIVE_INFINITY].map((le, i) => ({
      le,
      batches: i === 0 ? 1 : i === BATCH_DURATION_BUCKETS.length ? 1 : 2,
      events: i === 0 ? 2 : i === BATCH_DURATION_BUCKETS.length ? 2 : 4,
    }));
    expect(counted.rows).toEqual(expected);

    const text = toPrometheus(await corq.metrics());
    const found = samples(text);
    const bucket = (le: string) =>
      found.get(`corq_batch_duration_seconds_bucket{subscription="timed",outcome="acked",le="${le}"}`);
    expect(bucket("0.005")).toBe(1);
    expect(bucket("0.01")).toBe(3);
    expect(bucket("300")).toBe(durations.length - 1);
    expect(bucket("+Inf")).toBe(durations.length);
    expect(found.get('corq_batch_duration_seconds_count{subscription="timed",outcome="acked"}')).toBe(durations.length);
    const sum = found.get('corq_batch_duration_seconds_sum{subscription="timed",outcome="acked"}')!;
    expect(sum).toBeCloseTo(
      durations.reduce((a, b) => a + b, 0),
      3,
    );
    expect(found.get('corq_acked_events_total{subscription="timed"}')).toBe(2 * durations.length);
  });

  it("shows acked events, failed and dead batches, keys by state, lag and pending after real consumption", async () => {
    const { corq, another } = await open({
      subscriptions: [
        {
          name: "orders",
          maxAttempts: 2,
          backoff: { initialMs: 0, maxMs: 0, factor: 1 },
          handle: (_events, ctx) => {
            if (ctx.key === "bad") throw new Error("boom");
          },
        },
      ],
    });
    for (const stream of ["a", "b", "c"])
      await corq.append(stream, [
        { name: "E", data: {} },
        { name: "E", data: {} },
      ]);
    await corq.append("bad", [{ name: "E", data: {} }]);
    await corq.advance();
    await corq.drain("orders");
    await corq.drain("orders"); // the failed key's second (last) attempt
    await corq.append("later", [{ name: "E", data: {} }]); // not advanced yet: lag

    const found = samples(toPrometheus(await another().metrics()));
    const of = (name: string, extra = "") => found.get(`${name}{subscription="orders"${extra}}`);
    expect(of("corq_acked_events_total")).toBe(6);
    expect(of("corq_batch_duration_seconds_count", ',outcome="acked"')).toBe(3);
    expect(of("corq_batch_duration_seconds_count", ',outcome="failed"')).toBe(1);
    expect(of("corq_batch_duration_seconds_count", ',outcome="dead"')).toBe(1);
    expect(of("corq_subscription_keys", ',state="dead"')).toBe(1);
    expect(of("corq_subscription_keys", ',state="ready"')).toBe(0);
    expect(of("corq_subscription_dead_keys")).toBe(1);
    expect(of("corq_subscription_pending_events")).toBe(1);
    expect(of("corq_subscription_lag_events")).toBe(1);
    expect(of("corq_subscription_paused")).toBe(0);
    expect(of("corq_skipped_events_total", ',reason="no_key"')).toBe(0);
    expect(found.get("corq_log_head_position")).toBeGreaterThan(0);
    // buckets never decrease and end at the count
    const acked = [...found].filter(([name]) =>
      name.startsWith('corq_batch_duration_seconds_bucket{subscription="orders",outcome="acked"'),
    );
    expect(acked.map(([, v]) => v)).toEqual([...acked.map(([, v]) => v)].sort((x, y) => x - y));
    expect(acked.at(-1)?.[1]).toBe(3);
  });

  it("renders HELP and TYPE for every family and escapes label values; prunes the counters of a deleted subscription", async () => {
    const text = toPrometheus({
      subscriptions: [],
      log: { head: null },
      batchDurations: [
        { subscription: 'we"ird\\name', outcome: "acked", le: 0.5, batches: 2, events: 3, seconds: 0.6 },
      ],
    });
    expect(text).toContain(
      'corq_batch_duration_seconds_bucket{subscription="we\\"ird\\\\name",outcome="acked",le="0.5"} 2',
    );
    for (const family of text.match(/^# TYPE (\S+)/gm) ?? []) {
      const name = family.split(" ")[2];
      expect(text).toContain(`# HELP ${name} `);
    }

    const { corq, raw } = await open();
    await corq.putSubscription("gone", { events: ["*"], from: "now", deliver: { url: "https://example.com/hook" } });
    await corq.advance();
    const { rows } = await raw.query("SELECT id FROM corq.subscriptions WHERE name = 'gone'");
    await raw.query(
      "INSERT INTO corq.activity (subscription_id, key, started_at, events, outcome) VALUES ($1, 'k', now(), 1, 'acked')",
      [rows[0].id],
    );
    await raw.query("INSERT INTO corq.subscription_counters (subscription_id, batches_expired) VALUES ($1, 1)", [
      rows[0].id,
    ]);
    await corq.deleteSubscription("gone");
    const left = async () =>
      (
        await raw.query(
          "SELECT (SELECT count(*) FROM corq.batch_durations)::int AS durations, (SELECT count(*) FROM corq.subscription_counters)::int AS counters",
        )
      ).rows[0];
    expect(await left()).toEqual({ durations: 1, counters: 1 });
    await corq.pruneActivity();
    expect(await left()).toEqual({ durations: 0, counters: 0 });
  });
});

const E = { name: "E", data: {} };
const ALERT_SECRET = "metrics-test-secret";

/** The samples of the families typed counter, and of the histograms (their buckets, sums and counts). */
function counterSamples(text: string): Map<string, number> {
  const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]));
  return new Map(
    [...samples(text)].filter(([name]) => {
      const family = name.replace(/\{.*$/, "");
      return types.get(family) === "counter" || types.get(family.replace(/_(bucket|sum|count)$/, "")) === "histogram";
    }),
  );
}

/**
 * Subscription "orders" after: 8 events appended to 6 streams; a and b acked (2 events each);
 * "bad" failed then dead (maxAttempts 2); "later" postponed once then acked; "late" and
 * "doomed" taken by a consumer that vanished — their leases expired, taken over by a claim:
 * "late" acked, "doomed" (on its last attempt) dead-lettered by the claim; an alert on dead
 * keys sent twice (bad, doomed).
 */
async function busyOrders() {
  const receiver = await startReceiver(() => ALERT_SECRET);
  receivers.push(receiver);
  let postponed = false;
  const opened = await open({
    pushAllowPrivate: true,
    subscriptions: [
      {
        name: "orders",
        maxAttempts: 2,
        backoff: { initialMs: 0, maxMs: 0, factor: 1 },
        handle: (_events, ctx) => {
          if (ctx.key === "bad") throw new Error("boom");
          if (ctx.key === "later" && !postponed) {
            postponed = true;
            return { retryAfterMs: 0 };
          }
        },
      },
    ],
  });
  const { corq, raw } = opened;
  await corq.putAlert("ops", { url: receiver.url, secret: ALERT_SECRET, on: ["key.dead"] });
  for (const stream of ["a", "b"]) await corq.append(stream, [E, E]);
  for (const stream of ["bad", "later", "late", "doomed"]) await corq.append(stream, [E]);
  await corq.advance();
  await raw.query(`UPDATE corq.keys SET lease_token = gen_random_uuid(), lease_until = now() - interval '1 ms',
    available_at = now() - interval '1 ms', attempts = CASE WHEN key = 'doomed' THEN 1 ELSE 0 END
    WHERE key IN ('late', 'doomed')`);
  await corq.drain("orders");
  await corq.drain("orders");
  expect(await corq.checkAlerts()).toMatchObject({ sent: 2 });
  return opened;
}

describe("the counters alert rules are written on", () => {
  it("each counts what it says: events appended, batches by outcome, keys dead-lettered, alert sends", async () => {
    const { corq } = await busyOrders();
    // neither an append that fails its expectedVersion nor one that repeats an idempotency key appends
    await expect(corq.append("a", [E], { expectedVersion: 0 })).rejects.toThrow();
    await corq.append("c", [E], { idempotencyKey: "once" });
    await corq.append("c", [E], { idempotencyKey: "once" });

    const found = samples(toPrometheus(await corq.metrics()));
    const of = (name: string, labels: string) => found.get(`${name}{${labels}}`);
    const batches = (outcome: string) =>
      of("corq_subscription_batches_total", `subscription="orders",outcome="${outcome}"`);
    expect(found.get("corq_events_appended_total")).toBe(9);
    expect(batches("acked")).toBe(4);
    expect(batches("failed")).toBe(1);
    expect(batches("dead")).toBe(1);
    expect(batches("expired")).toBe(2);
    expect(batches("postponed")).toBe(1);
    expect(of("corq_subscription_keys_dead_lettered_total", 'subscription="orders"')).toBe(2);
    expect(of("corq_acked_events_total", 'subscription="orders"')).toBe(6);
    expect(of("corq_alerts_sent_total", 'alert="ops"')).toBe(2);
    expect(of("corq_alerts_failed_total", 'alert="ops"')).toBe(0);
  });

  it("never go back: scrape, prune the activity record, run housekeeping, retention and an erasure, delete another subscription, scrape again", async () => {
    const { corq, raw } = await busyOrders();
    await corq.putSubscription("gone", { events: ["*"], from: "now", deliver: { url: "https://example.com/hook" } });
    await corq.advance();
    const before = counterSamples(toPrometheus(await corq.metrics()));
    expect(before.get("corq_events_appended_total")).toBe(8);

    // everything old: the batch records, the events (past every watermark), the keys' last activity
    await raw.query(
      "UPDATE corq.activity SET started_at = started_at - interval '1 day', finished_at = finished_at - interval '1 day'",
    );
    await raw.query("UPDATE corq.events SET created_at = now() - interval '2 days'");
    await raw.query("UPDATE corq.keys SET active_at = now() - interval '30 days'");
    expect((await corq.pruneActivity({ olderThanMs: 60_000 })).pruned).toBeGreaterThan(0);
    expect((await corq.housekeeping()).keys).toBeGreaterThan(0);
    await corq.setRetention({ maxAgeMs: 86_400_000 });
    expect((await corq.runRetention()).deleted).toBeGreaterThan(0);
    expect((await corq.eraseStream("doomed")).erased).toBe(1);
    await corq.deleteSubscription("gone");
    await corq.pruneActivity({ olderThanMs: 60_000 }); // also forgets the counters of "gone"

    const after = counterSamples(toPrometheus(await corq.metrics()));
    const decreased = [...before].filter(
      ([name, value]) => !name.includes('"gone"') && !((after.get(name) ?? -1) >= value),
    );
    expect(decreased).toEqual([]);
    // (what the scrapes compared: the counters of "orders" and the log's, not nothing)
    expect(before.get('corq_subscription_batches_total{subscription="orders",outcome="acked"}')).toBe(4);
    expect(after.get('corq_subscription_keys_dead_lettered_total{subscription="orders"}')).toBe(2);
    expect([...before.keys()].some((name) => name.startsWith("corq_batch_duration_seconds_bucket"))).toBe(true);
  });
});
