// Mutants of delays: maxDelayMs, the order of delayed events, the next due time (gathered by mutants.ts).
import { one, type Mutant } from "./mutant.js";

export const delaysMutants: Mutant[] = [
  // --- a key waits for its delayed head, its later events behind it -------------------------
  {
    name: "delays: a batch runs past a delayed event whose time has not come",
    edits: one("src/sql/consume/claimBatch.ts", "AND (c.held_from IS NULL OR q.seq < c.held_from)", "AND true"),
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: an ack leaves the key ready while its next event is delayed (consume)",
    edits: one(
      "src/sql/consume/ackBatch.ts",
      "THEN greatest(f.at, ${heldUntil({ subscriptionId: sql`k.subscription_id`, key: sql`k.key`, after: sql`${through.seq}::bigint`, at: sql`f.at` })}) END",
      "THEN f.at END",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: a settled ack leaves the key ready while its next event is delayed (drain)",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "THEN greatest(f.at, ${heldUntil({ subscriptionId: sql`k.subscription_id`, key: sql`k.key`, after: sql`f.through_seq`, at: sql`f.at` })}) END",
      "THEN f.at END",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: the advance makes an idle key with a delayed first event ready now",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "greatest(now(), (array_agg(deliver_at ORDER BY tx, position))[1])",
      "now()",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: a key given back with a delayed head is ready at once",
    edits: one("src/sql/consume/releaseLease.ts", "after: sql`k.last_seq`,", "after: sql`k.seq`,"),
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: a rewind requeues a delayed event without its time",
    edits: one(
      "src/sql/operate/rewindRequeue.ts",
      "(SELECT ${cappedDeliverAt(sql`e`, sql`(SELECT max_delay_ms FROM moved)`)} FROM ${events} e WHERE e.position = m.position)",
      "NULL::timestamptz",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  // --- the order of a key's delayed events ------------------------------------------------
  {
    // [e1, e2 +10 min, e3 +1 min]: the batch stopped before e3 (due first), so e2 went at once
    name: "delays: a batch stops at the event due soonest, not the first not yet due (a later delay goes early)",
    edits: one(
      "src/sql/common/delays.ts",
      "AND d.deliver_at > ${at} AND d.seq > ${after} ORDER BY d.seq LIMIT 1)",
      "AND d.deliver_at > ${at} AND d.seq > ${after} ORDER BY d.deliver_at LIMIT 1)",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  {
    // after an ack the key waits for its next delayed event, not its head: an undelayed head
    // waits out a later event's whole delay whenever a batch stops early
    name: "delays: after an ack a key waits for its next delayed event though its head is not delayed",
    edits: one(
      "src/sql/common/delays.ts",
      "AND h.seq > ${after} ORDER BY h.seq LIMIT 1)",
      "AND h.seq > ${after} AND h.deliver_at > ${at} ORDER BY h.seq LIMIT 1)",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  // --- the next due time ------------------------------------------------------------------
  {
    name: "delays: the next due time as an int (overflows past 24.8 days: serve's runner logs an error every idle pass)",
    edits: one("src/sql/consume/nextDue.ts", "* 1000)::float8 AS due_in_ms", "* 1000)::int AS due_in_ms"),
    tests: ["test/runner.int.test.ts"],
  },
  // --- maxDelayMs: a subscription's cap, applied where it queues an event --------------------
  {
    name: "delays: the cap not applied by the advance of a path key (a year's delay from one prefix holds the key a year)",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "${cappedDeliverAt(sql`e`, sql`sub.max_delay_ms`)} AS deliver_at,",
      "e.deliver_at AS deliver_at,",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: the cap not applied by the advance of a key function (the event's own time queued)",
    edits: one(
      "src/advance.ts",
      "deliver_at: row.queued_deliver_at === null ? null : new Date(row.queued_deliver_at).toISOString(),",
      "deliver_at: row.deliver_at === null ? null : new Date(row.deliver_at).toISOString(),",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: the cap not applied by a rewind's requeue (a replayed key waits the event's whole delay)",
    edits: one(
      "src/sql/operate/rewindRequeue.ts",
      "(SELECT ${cappedDeliverAt(sql`e`, sql`(SELECT max_delay_ms FROM moved)`)} FROM ${events} e",
      "(SELECT e.deliver_at FROM ${events} e",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: the cap applied at the append, a day for every subscription (one that allows a year gets a day)",
    edits: one(
      "src/sql/log/appendEvents.ts",
      "THEN statement_timestamp() + (input.e->>'delayMs')::bigint * interval '1 millisecond'",
      "THEN statement_timestamp() + least((input.e->>'delayMs')::bigint, 86400000) * interval '1 millisecond'",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: the cap as least() (a null deliver_at becomes the cap: every event waits maxDelayMs)",
    edits: one(
      "src/sql/common/delays.ts",
      "return sql`CASE WHEN ${e}.deliver_at > ${cap} THEN ${cap} ELSE ${e}.deliver_at END`;",
      "return sql`least(${e}.deliver_at, ${cap})`;",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: a changed maxDelayMs in code not written (left out of the changed-settings comparison)",
    edits: [
      {
        file: "src/sql/advance/syncSubscriptions.ts",
        search: "s.max_leased_keys_per_tenant, s.max_delay_ms)",
        replace: "s.max_leased_keys_per_tenant)",
      },
      {
        file: "src/sql/advance/syncSubscriptions.ts",
        search: "i.max_leased_keys_per_tenant, i.max_delay_ms)",
        replace: "i.max_leased_keys_per_tenant)",
      },
    ],
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: PUT /subscriptions/:name keeps the old maxDelayMs on an update",
    edits: one(
      "src/sql/operate/putSubscription.ts",
      "max_leased_keys_per_tenant = excluded.max_leased_keys_per_tenant, max_delay_ms = excluded.max_delay_ms,",
      "max_leased_keys_per_tenant = excluded.max_leased_keys_per_tenant,",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  // --- long delays in view -----------------------------------------------------------------
  {
    name: "delays: stats count every waiting key as delayed over an hour",
    edits: one(
      "src/sql/inspect/subscriptionStats.ts",
      "AND NOT k.rate_waits\n  AND k.available_at > now() + interval '1 hour'`;",
      "AND NOT k.rate_waits`;",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: stats count a key in backoff after a failure as delayed",
    edits: one(
      "src/sql/inspect/subscriptionStats.ts",
      "${statusFilter.backoff} AND k.attempts = 0 AND k.postponed = 0",
      "${statusFilter.backoff} AND k.postponed = 0",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  {
    name: "delays: the doctor says nothing of a single long-delayed key",
    edits: one("src/doctor.ts", "if (row.delayed_keys > 0) {", "if (row.delayed_keys > 1) {"),
    tests: ["test/doctor.test.ts", "test/delays.int.test.ts"],
  },
  {
    name: "delays: the doctor counts only replaying keys (the live part of its probe left out)",
    edits: one("src/sql/inspect/doctor.ts", "        ${delayedPart(false)}\n        UNION ALL\n", ""),
    tests: ["test/delays.int.test.ts"],
  },
];
