// GET /metrics' figures (src/metrics.ts) on real Postgres: the batch-duration histogram kept by
// the trigger on activity (its buckets agree with BATCH_DURATION_BUCKETS), acked events, keys
// by state and the gauges, rendered as Prometheus text.
import { describe, expect, it } from "vitest";
import { BATCH_DURATION_BUCKETS, toPrometheus } from "../src/index.js";
import { useCorq } from "./helpers/corq.js";

const open = useCorq();

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
    await corq.putSubscription("gone", { events: ["*"], deliver: { url: "https://example.com/hook" } });
    const { rows } = await raw.query("SELECT id FROM corq.subscriptions WHERE name = 'gone'");
    await raw.query(
      "INSERT INTO corq.activity (subscription_id, key, started_at, events, outcome) VALUES ($1, 'k', now(), 1, 'acked')",
      [rows[0].id],
    );
    await corq.deleteSubscription("gone");
    expect((await raw.query("SELECT count(*)::int AS n FROM corq.batch_durations")).rows[0].n).toBe(1);
    await corq.pruneActivity();
    expect((await raw.query("SELECT count(*)::int AS n FROM corq.batch_durations")).rows[0].n).toBe(0);
  });
});
