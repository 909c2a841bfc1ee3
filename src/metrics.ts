// GET /metrics: corq's figures in the Prometheus text format (version 0.0.4). Everything is
// read from the database, so every runtime — a Worker invocation, any of several `serve`
// processes — answers the same numbers.
import type { MetricsSnapshot, SubscriptionStats } from "./types.js";

export type { BatchDurationCount, MetricsSnapshot } from "./types.js";

/**
 * Upper bounds (seconds) of the batch-duration histogram's buckets. The trigger that counts
 * batches (drizzle/0008_batch_durations.sql) has the same list; test/metrics.int.test.ts
 * checks that they agree.
 */
export const BATCH_DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
const labels = (pairs: Record<string, string>) =>
  `{${Object.entries(pairs)
    .map(([k, v]) => `${k}="${escapeLabel(v)}"`)
    .join(",")}}`;
const number = (value: number) =>
  Number.isFinite(value) ? String(value) : Number.isNaN(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf";

/** Renders a snapshot as Prometheus text: every family with HELP and TYPE, then its samples. */
export function toPrometheus(snapshot: MetricsSnapshot): string {
  const out: string[] = [];
  const family = (name: string, type: "gauge" | "counter" | "histogram", help: string, samples: string[]) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...samples);
  };
  const perSubscription = (value: (s: SubscriptionStats) => number | null, metric: string) =>
    snapshot.subscriptions.flatMap((s) => {
      const v = value(s);
      return v === null ? [] : [`${metric}${labels({ subscription: s.name })} ${number(v)}`];
    });

  family(
    "corq_subscription_lag_events",
    "gauge",
    "Events in the log not yet advanced into the subscription's queue (past 10,000: estimated).",
    perSubscription((s) => s.lag, "corq_subscription_lag_events"),
  );
  family(
    "corq_subscription_pending_events",
    "gauge",
    "Events queued for the subscription and not yet acknowledged.",
    perSubscription((s) => s.pending, "corq_subscription_pending_events"),
  );
  family(
    "corq_subscription_keys",
    "gauge",
    "Keys with work, by state: ready, leased (being handled), backoff (retrying later), dead (dead-lettered).",
    snapshot.subscriptions.flatMap((s) =>
      (["ready", "leased", "backoff", "dead"] as const).map(
        (state) => `corq_subscription_keys${labels({ subscription: s.name, state })} ${s.keys[state]}`,
      ),
    ),
  );
  family(
    "corq_subscription_waiting_keys",
    "gauge",
    'Keys waiting for a delayed event (deliverAt) or a "come back later" answer, with no failed attempt (part of state="backoff").',
    perSubscription((s) => s.keys.waiting, "corq_subscription_waiting_keys"),
  );
  family(
    "corq_subscription_dead_keys",
    "gauge",
    'Dead-lettered keys (the same as corq_subscription_keys{state="dead"}, for alerts).',
    perSubscription((s) => s.keys.dead, "corq_subscription_dead_keys"),
  );
  family(
    "corq_subscription_oldest_pending_age_seconds",
    "gauge",
    "Age of the oldest event still queued (absent when nothing is queued).",
    perSubscription(
      (s) => (s.oldestPendingAgeMs === null ? null : s.oldestPendingAgeMs / 1000),
      "corq_subscription_oldest_pending_age_seconds",
    ),
  );
  family(
    "corq_subscription_paused",
    "gauge",
    "1 while the subscription is paused.",
    perSubscription((s) => (s.paused ? 1 : 0), "corq_subscription_paused"),
  );
  family(
    "corq_subscription_advance_failing",
    "gauge",
    "1 while the subscription's last advance failed (its stats say why).",
    perSubscription((s) => (s.advanceError ? 1 : 0), "corq_subscription_advance_failing"),
  );
  family(
    "corq_skipped_events_total",
    "counter",
    "Events not delivered: no_key (the key path was missing or null), invalid_key (the key broke the key rule), dead_letter (an operator skipped a dead letter).",
    snapshot.subscriptions.flatMap((s) => [
      `corq_skipped_events_total${labels({ subscription: s.name, reason: "no_key" })} ${s.skipped - s.skippedInvalidKeys}`,
      `corq_skipped_events_total${labels({ subscription: s.name, reason: "invalid_key" })} ${s.skippedInvalidKeys}`,
      `corq_skipped_events_total${labels({ subscription: s.name, reason: "dead_letter" })} ${s.skippedDeadLetters}`,
    ]),
  );

  // counters from the histogram table: acked events, and the histogram itself
  const acked = new Map<string, number>();
  const series = new Map<string, { subscription: string; outcome: string; counts: Map<number, number>; sum: number }>();
  for (const row of snapshot.batchDurations) {
    if (row.outcome === "acked") acked.set(row.subscription, (acked.get(row.subscription) ?? 0) + row.events);
    const id = `${row.subscription}\u0000${row.outcome}`;
    const entry = series.get(id) ?? { subscription: row.subscription, outcome: row.outcome, counts: new Map(), sum: 0 };
    entry.counts.set(row.le, (entry.counts.get(row.le) ?? 0) + row.batches);
    entry.sum += row.seconds;
    series.set(id, entry);
  }
  family(
    "corq_acked_events_total",
    "counter",
    "Events acknowledged (handled or delivered). Resets after a database crash (an unlogged table).",
    perSubscription((s) => acked.get(s.name) ?? 0, "corq_acked_events_total"),
  );
  const bounds = [...BATCH_DURATION_BUCKETS, Number.POSITIVE_INFINITY];
  family(
    "corq_batch_duration_seconds",
    "histogram",
    "Time from claiming a batch to its outcome, by outcome: acked, failed, dead, expired (a lease that ran out). Resets after a database crash.",
    [...series.values()].flatMap((s) => {
      let cumulative = 0;
      const samples = bounds.map((le, i) => {
        // counted at a bound this list lacks (a bucket list of another release): the next bound up
        const below = bounds[i - 1] ?? Number.NEGATIVE_INFINITY; // the first bound has none below it
        for (const [at, n] of s.counts) if (at > below && at <= le) cumulative += n;
        return `corq_batch_duration_seconds_bucket${labels({ subscription: s.subscription, outcome: s.outcome, le: number(le) })} ${cumulative}`;
      });
      const base = labels({ subscription: s.subscription, outcome: s.outcome });
      return [
        ...samples,
        `corq_batch_duration_seconds_sum${base} ${number(s.sum)}`,
        `corq_batch_duration_seconds_count${base} ${cumulative}`,
      ];
    }),
  );
  // batches by outcome: acked, failed and dead from the histogram's table (the activity record),
  // expired and postponed from the key rows (subscriptionCounters: exact, and a dead-at-claim
  // batch is one that expired); every outcome of every subscription, 0 until it happens, so an
  // alert rule's rate() has its series from the start
  const batches = new Map<string, number>();
  for (const row of snapshot.batchDurations) {
    const id = `${row.subscription}\u0000${row.outcome}`;
    batches.set(id, (batches.get(id) ?? 0) + row.batches);
  }
  const counters = new Map((snapshot.counters ?? []).map((c) => [c.subscription, c]));
  family(
    "corq_subscription_batches_total",
    "counter",
    "Batches by outcome: acked, failed (retried later), dead (the failure on the last attempt), expired (the lease ran out first; counted when a claim takes the key over), postponed (a come-back-later answer).",
    snapshot.subscriptions.flatMap((s) => {
      const kept = counters.get(s.name);
      const fromKeys = kept ? { expired: kept.batchesExpired, postponed: kept.batchesPostponed } : {};
      return Object.entries({
        acked: batches.get(`${s.name}\u0000acked`) ?? 0,
        failed: batches.get(`${s.name}\u0000failed`) ?? 0,
        dead: batches.get(`${s.name}\u0000dead`) ?? 0,
        ...fromKeys,
      }).map(([outcome, n]) => `corq_subscription_batches_total${labels({ subscription: s.name, outcome })} ${n}`);
    }),
  );
  family(
    "corq_subscription_keys_dead_lettered_total",
    "counter",
    "Keys dead-lettered: a failure, or an expired lease, on the last attempt (corq_subscription_dead_keys is how many are dead now).",
    perSubscription(
      (s) => counters.get(s.name)?.keysDeadLettered ?? null,
      "corq_subscription_keys_dead_lettered_total",
    ),
  );
  family(
    "corq_events_appended_total",
    "counter",
    "Events appended to the log (committed), erased and retention-removed ones included.",
    snapshot.log.appended === undefined ? [] : [`corq_events_appended_total ${snapshot.log.appended}`],
  );
  family(
    "corq_alerts_sent_total",
    "counter",
    "Alert POSTs the receiver took (2xx), per alert.",
    (snapshot.alerts ?? []).map((a) => `corq_alerts_sent_total${labels({ alert: a.alert })} ${a.sent}`),
  );
  family(
    "corq_alerts_failed_total",
    "counter",
    "Alert sends given up after their retries, per alert.",
    (snapshot.alerts ?? []).map((a) => `corq_alerts_failed_total${labels({ alert: a.alert })} ${a.failed}`),
  );
  family(
    "corq_log_head_position",
    "gauge",
    "Position of the newest event in the log.",
    snapshot.log.head === null ? [] : [`corq_log_head_position ${snapshot.log.head}`],
  );
  return `${out.join("\n")}\n`;
}
