// The mutation check's list (run by test/mutants/run.ts): each mutant is a regression worth
// catching, named by what it breaks, made by replacing a piece of source text, and the test
// files that must fail when it is applied. When the code changes so that a search text is no
// longer found, the mutant is reported `stale`: rewrite its search text against the new code
// (same regression), never drop it silently.

import { one, type Mutant } from "./mutant.js";
import { idempotencyMutants } from "./idempotency.js";
import { delaysMutants } from "./delays.js";
import { alertsMutants } from "./alerts.js";
import { lifecycleMutants } from "./lifecycle.js";
import { fairnessMutants } from "./fairness.js";
import { flowControlMutants } from "./flowControl.js";
import { connectionsMutants } from "./connections.js";
import { poolerMutants } from "./pooler.js";
import { traceContextMutants } from "./traceContext.js";
import { wakeUpsMutants } from "./wakeUps.js";
import { cellsMutants } from "./cells.js";

export type { Edit, Mutant } from "./mutant.js";

export const mutants: Mutant[] = [
  // --- advance ---------------------------------------------------------------------------
  {
    name: "advance: ignores xmin horizon",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "WHERE (e.tx, e.position) > ((SELECT watermark_tx FROM sub), (SELECT watermark_position FROM sub))\n        AND e.tx < pg_snapshot_xmin(pg_current_snapshot())",
      "WHERE (e.tx, e.position) > ((SELECT watermark_tx FROM sub), (SELECT watermark_position FROM sub))",
    ),
    tests: ["test/pipeline.int.test.ts"],
  },
  {
    name: "advance by function: ignores xmin horizon",
    edits: one(
      "src/sql/advance/advanceByFunction.ts",
      "\n      AND e.tx < pg_snapshot_xmin(pg_current_snapshot())\n    ORDER BY e.tx, e.position",
      "\n    ORDER BY e.tx, e.position",
    ),
    tests: ["test/pipeline.int.test.ts"],
  },
  {
    name: "advance: null keys enqueued",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "CASE WHEN invalid IS NULL THEN key END AS key",
      "CASE WHEN invalid IS NULL THEN coalesce(key, 'null') END AS key",
    ),
    tests: ["test/pipeline.int.test.ts"],
  },
  {
    name: "advance: keys that break the key rule enqueued",
    edits: one("src/sql/advance/advanceSubscription.ts", "CASE WHEN invalid IS NULL THEN key END AS key", "key"),
    tests: ["test/advanceEdges.int.test.ts"],
  },
  {
    name: "advance: a dead key made ready by its next events (it stays dead until retried or skipped)",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "available_at = CASE WHEN k.available_at IS NULL AND k.dead_at IS NULL THEN excluded.available_at",
      "available_at = CASE WHEN k.available_at IS NULL THEN excluded.available_at",
    ),
    tests: ["test/consumers.int.test.ts"],
  },
  // No mutant for "advance: subscription row not locked": since advancers are coalesced by a
  // transaction-scoped advisory lock, dropping the sub CTE's FOR UPDATE is equivalent — no two
  // advancers of one subscription overlap, and `moved` locks the row before any key row (the
  // lock order the skip statement relies on). The FOR UPDATE stays as defence in depth.
  {
    name: "advance: not coalesced (a second advancer waits for the first)",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "        AND pg_try_advisory_xact_lock(${ADVANCING}::int4, ${subscriptionId}::int4)\n",
      "",
    ),
    tests: ["test/coalescedAdvance.int.test.ts"],
  },
  {
    name: "advance: kicks that came during a round are not re-checked (lost wake-up)",
    edits: one("src/advance.ts", "held.length > 0 && pass < 10", "held.length > 0 && pass < 0"),
    tests: ["test/coalescedAdvance.int.test.ts"],
  },
  {
    name: "dispatch: consumer slots not bounded by CORQ_CONCURRENCY",
    edits: one("src/sql/consume/consumerSlots.ts", "WHERE slot <= ${max} AND", "WHERE"),
    tests: ["test/worker/dispatchSlots.worker.test.ts"],
  },
  {
    name: "dispatch: a consumer slot per ready key again, whatever the keys per claim",
    edits: one(
      "src/sql/consume/consumerSlots.ts",
      "(ready + ${keysPerClaim} - 1) / ${keysPerClaim} AS consumers",
      "ready AS consumers",
    ),
    tests: ["test/coalescedAdvance.int.test.ts", "test/worker/dispatchSlots.worker.test.ts"],
  },
  {
    name: "serve's runner: a drain per ready key, whatever the keys per claim",
    edits: one("src/node/runner.ts", "Math.ceil(keys / (transactional.has(name) ? 1 : options.keysPerClaim))", "keys"),
    tests: ["test/runner.int.test.ts"],
  },
  {
    name: "advance by function: write ignores the watermark it read (no compare-and-set)",
    edits: one(
      "src/sql/advance/advanceByFunction.ts",
      "sql`s.watermark_tx = ${read.tx}::xid8 AND s.watermark_position = ${read.position}\n          AND s.erase_epoch = ${read.eraseEpoch} AND s.rewind_token IS NULL AND ${asyncCommit}`",
      "sql`s.rewind_token IS NULL AND ${asyncCommit}`",
    ),
    tests: ["test/pipeline.int.test.ts"],
  },
  // --- append ----------------------------------------------------------------------------
  {
    name: "append: input order ignored",
    edits: one(
      "src/sql/log/appendEvents.ts",
      "      FROM claim, input\n      ORDER BY input.ord\n",
      "      FROM claim, input\n",
    ),
    tests: ["test/sqlOrder.test.ts", "test/append.int.test.ts"],
  },
  {
    name: "append: expectedVersion ignored",
    edits: one(
      "src/sql/log/appendEvents.ts",
      "WHERE stream = ${stream} AND version = ${expectedVersion}\n",
      "WHERE stream = ${stream}\n",
    ),
    tests: ["test/append.int.test.ts"],
  },
  {
    name: "append: older transaction may append (per-stream order)",
    edits: one(
      "src/sql/log/appendEvents.ts",
      "sql`(${lastTx} IS NULL OR ${lastTx} <= ${current})`",
      "sql`(${lastTx} IS NULL OR true)`",
    ),
    tests: ["test/streamOrder.int.test.ts"],
  },
  {
    name: "append: takes its transaction id before its turn on the stream (refused for order under concurrency)",
    edits: one(
      "src/sql/log/appendEvents.ts",
      ": sql`${streamLocked} AS (SELECT pg_advisory_xact_lock(hashtextextended(${stream}, ${APPENDING})))${fenced},`;",
      ": sql`${streamLocked} AS (SELECT 1)${fenced},`;",
    ),
    tests: ["test/streamOrder.int.test.ts"],
  },
  {
    name: "append: an expectedVersion append takes its transaction id before its turn on the stream",
    edits: one(
      "src/sql/log/appendEvents.ts",
      "${notOlder(sql`last_tx`, sql`(SELECT pg_current_xact_id() FROM locked)`)}",
      "${notOlder(sql`last_tx`)}",
    ),
    tests: ["test/streamOrder.int.test.ts"],
  },
  {
    name: "readLog: ignores xmin horizon",
    edits: one(
      "src/sql/log/readLog.ts",
      "WHERE ${cursor} AND e.tx < pg_snapshot_xmin(pg_current_snapshot())",
      "WHERE ${cursor}",
    ),
    tests: ["test/append.int.test.ts"],
  },
  // --- erasure of a stream (issue 30 item 2) ----------------------------------------------
  {
    name: "erase: versions appended while the erasure runs are erased too",
    edits: one("src/sql/log/eraseStream.ts", "e.version <= (SELECT erased_through FROM tomb)", "true"),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: a round takes no advancer lock (an advance at work may queue what it erases)",
    edits: one(
      "src/sql/log/eraseStream.ts",
      "SELECT id, pg_advisory_xact_lock(${ADVANCING}::int4, id)::text AS held",
      "SELECT id, ''::text AS held",
    ),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: a round does not sweep what the round before it erased",
    edits: one("src/sql/log/eraseStream.ts", " UNION SELECT unnest(sweep) FROM tomb", ""),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: a dead key whose failed event was erased stays dead",
    edits: one(
      "src/sql/log/eraseStream.ts",
      " OR coalesce(j.failed_position = ANY(array_agg(r.position ORDER BY r.position)), false)",
      "",
    ),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: a key whose queue it emptied stays ready (claimed for nothing)",
    edits: one("src/sql/log/eraseStream.ts", "                            WHEN k.pending - r.n = 0 THEN NULL\n", ""),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: a live lease taken from its batch (the batch in flight cannot finish)",
    edits: one("src/sql/log/eraseStream.ts", "NOT j.live AND (", "("),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: reads list versions an interrupted erasure left in the log",
    edits: one("src/sql/log/readStream.ts", " AND e.version > coalesce(t.erased_through, -1)", ""),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: the route needs only the read scope",
    edits: one(
      "src/http/api.ts",
      'app.delete("/streams/:stream", requireScope("admin")',
      'app.delete("/streams/:stream", requireScope("read")',
    ),
    tests: ["test/worker/erase.worker.test.ts"],
  },
  {
    name: "erase: an ack lowers pending by the batch's size (an erased event counted twice)",
    edits: one(
      "src/sql/consume/ackBatch.ts",
      "pending = k.pending - (SELECT count(*) FROM removed),\n        -- more queued: ready at once, or when its next event may be delivered (a delayed one)\n        available_at = CASE WHEN k.pending - (SELECT count(*) FROM removed) > 0",
      "pending = k.pending - ${count},\n        available_at = CASE WHEN k.pending - ${count} > 0",
    ),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: a drain's ack lowers pending by the batch's size",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "pending = k.pending - coalesce(r.n, 0),\n        -- more queued: ready at once, or when its next event may be delivered (a delayed one)\n        available_at = CASE WHEN k.pending - coalesce(r.n, 0) > 0",
      "pending = k.pending - f.count,\n        available_at = CASE WHEN k.pending - f.count > 0",
    ),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: a batch whose events were all erased dies on its failure (consume)",
    edits: one(
      "src/sql/consume/failBatch.ts",
      "dead_at = CASE WHEN k.attempts + 1 >= s.max_attempts AND k.pending > 0 THEN f.at END",
      "dead_at = CASE WHEN k.attempts + 1 >= s.max_attempts THEN f.at END",
    ),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: a batch whose events were all erased dies on its failure (drain)",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "dead_at = CASE WHEN k.attempts + 1 >= s.max_attempts AND k.pending > 0 THEN f.at END",
      "dead_at = CASE WHEN k.attempts + 1 >= s.max_attempts THEN f.at END",
    ),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: an expired lease on a key with nothing queued dies on it",
    edits: one("src/sql/consume/claimBatch.ts", " AND k.pending > 0) AS dies", ") AS dies"),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: a key given back with nothing queued is made ready (claimed for nothing again)",
    edits: one(
      "src/sql/consume/releaseLease.ts",
      "available_at = CASE WHEN pending > 0 THEN greatest(",
      "available_at = CASE WHEN true THEN greatest(",
    ),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: a claim hands out a queue row whose event is gone",
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "FROM ${queue} q JOIN ${events} e ON e.position = q.position",
      "FROM ${queue} q LEFT JOIN ${events} e ON e.position = q.position",
    ),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: a claim with a snapshot older than a round hands out the events it erased",
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "\n        AND c.erased = (SELECT k0.erased FROM ${keys} k0 WHERE k0.subscription_id = c.subscription_id AND k0.key = c.key)",
      "",
    ),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "erase: a function-key advance that read before a round writes after it (no erase_epoch in its compare-and-set)",
    edits: one("src/sql/advance/advanceByFunction.ts", "\n          AND s.erase_epoch = ${read.eraseEpoch}", ""),
    tests: ["test/erase.int.test.ts"],
  },
  // --- claim -----------------------------------------------------------------------------
  {
    name: "claim: a plain claim takes keys of a subscription that has a cap by now (no check that it is still plain)",
    edits: one("src/sql/consume/claimBatch.ts", "? sql`AND (SELECT plain FROM sub)`", "? sql``"),
    tests: ["test/leasedKeysCap.int.test.ts"],
  },
  {
    name: "claim: a fair-only claim takes keys of a subscription that has a cap by now (no check that it is still fair only)",
    edits: one("src/sql/consume/claimBatch.ts", "? sql`AND (SELECT fair_only FROM sub)`", "? sql``"),
    tests: ["test/leasedKeysCap.int.test.ts"],
  },
  {
    name: "drain: every drain's first claim is in full (the last drain's finding not kept)",
    edits: one("src/consume.ts", "let plain = limits.plainHint?.plain ?? false;", "let plain = false;"),
    tests: ["test/leasedKeysCap.int.test.ts"],
  },
  {
    name: "claim: no SKIP LOCKED",
    // the live and replaying parts of the pick (the fair parts have their own)
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "      LIMIT ${take}\n      FOR UPDATE OF k SKIP LOCKED",
      "      LIMIT ${take}\n      FOR UPDATE OF k",
    ),
    tests: ["test/lockWaits.int.test.ts", "test/consumers.int.test.ts"],
  },
  {
    name: "claim: batch read unordered",
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "      ORDER BY q.seq\n      LIMIT c.batch_limit",
      "      LIMIT c.batch_limit",
    ),
    tests: ["test/forcedPlans.int.test.ts", "test/sqlOrder.test.ts"],
  },
  {
    // (with the events joined inside the batch's LATERAL, which sorts by seq, dropping the outer
    // ORDER BY changes nothing any plan can show: the rows are sorted wrongly instead)
    name: "claim: batch rows returned unsorted (by position, not seq)",
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "    ORDER BY key, seq NULLS FIRST`;",
      "    ORDER BY key, position NULLS FIRST`;",
    ),
    tests: ["test/forcedPlans.int.test.ts"],
  },
  {
    name: "claim: ack cursor ignored",
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "AND NOT c.dies\n        -- the snapshot may predate another consumer's ack of this key (or a rewind): skip\n        -- what the cursor says is done\n        AND q.seq > c.last_seq",
      "AND NOT c.dies",
    ),
    tests: ["test/consumers.int.test.ts"],
  },
  {
    name: "claim: paused subscription claimed",
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "k.available_at <= now() AND NOT (SELECT paused FROM sub)",
      "k.available_at <= now()",
    ),
    tests: ["test/consumers.int.test.ts"],
  },
  {
    name: "claim: lease from statement start (now())",
    edits: one("src/sql/consume/claimBatch.ts", "${lockedNow} AS locked_at", "now() AS locked_at"),
    tests: ["test/lockWaits.int.test.ts"],
  },
  {
    name: "claim: longest-waiting key not first",
    // both parts of the pick (live, then replaying keys) are ordered by this one line
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "      ORDER BY k.available_at, k.key\n      LIMIT ${take}",
      "      ORDER BY k.key\n      LIMIT ${take}",
    ),
    tests: ["test/consumers.int.test.ts"],
  },
  {
    name: "claim: expired lease not counted as an attempt",
    edits: one("src/sql/consume/claimBatch.ts", "attempts = k.attempts + pick.expired::int,", "attempts = k.attempts,"),
    tests: ["test/consumers.int.test.ts", "test/activity.int.test.ts"],
  },
  // --- ack and fail ----------------------------------------------------------------------
  {
    name: "ack: fence ignores lease expiry",
    edits: one(
      "src/sql/consume/ackBatch.ts",
      "WHERE lease_token = ${lease.token}::uuid AND lease_until > ${lockedNow}",
      "WHERE lease_token = ${lease.token}::uuid",
    ),
    tests: ["test/lockWaits.int.test.ts"],
  },
  {
    name: "ack: fence ignores lease token",
    edits: one(
      "src/sql/consume/ackBatch.ts",
      "WHERE lease_token = ${lease.token}::uuid AND lease_until > ${lockedNow}",
      "WHERE l.lease_until > ${lockedNow}",
    ),
    tests: ["test/consumers.int.test.ts"],
  },
  {
    name: "ack: pending count not decremented",
    edits: one(
      "src/sql/consume/ackBatch.ts",
      "pending = k.pending - (SELECT count(*) FROM removed),",
      "pending = k.pending,",
    ),
    tests: ["test/pipeline.int.test.ts"],
  },
  {
    name: "ack: a prefix ack deletes the whole queue of the key",
    edits: one(
      "src/sql/consume/ackBatch.ts",
      "AND q.key = ${lease.key} AND q.seq <= ${through.seq}",
      "AND q.key = ${lease.key}",
    ),
    tests: ["test/consumers.int.test.ts"],
  },
  // --- transactional handlers -------------------------------------------------------------
  {
    name: "transactional: the ack outside the handler's transaction",
    edits: one(
      "src/consume/handleInTransaction.ts",
      "const [row] = await tx.run<{ acked: number; pending: number | null; at: string | null }>(",
      "const [row] = await executor.run<{ acked: number; pending: number | null; at: string | null }>(",
    ),
    tests: ["test/transactional.int.test.ts"],
  },
  {
    name: "transactional: a lost lease's transaction committed anyway",
    // both guards gone: the LeaseLost throw, and present() on the ack's time (null when the
    // fence failed: it threw too, so dropping the throw alone rolled back all the same and survived)
    edits: one(
      "src/consume/handleInTransaction.ts",
      'if (acked !== 1) throw new LeaseLost(through);\n      const done = new Date(present(at, "the ack\'s time"));',
      "const done = new Date(at ?? Date.now());",
    ),
    tests: ["test/transactional.int.test.ts"],
  },
  {
    name: "transactional: ctx.run outside the handler's transaction",
    edits: one("src/consume/handleInTransaction.ts", "        run: tx.run,\n", ""),
    tests: ["test/transactional.int.test.ts"],
  },
  {
    name: "fail: never dead",
    edits: [
      { file: "src/sql/consume/failBatch.ts", search: "k.attempts + 1 >= s.max_attempts", replace: "false", all: true },
    ],
    tests: ["test/consumers.int.test.ts"],
  },
  {
    name: "fail: backoff not capped at maxMs",
    edits: one(
      "src/sql/consume/failBatch.ts",
      "least(s.backoff_max_ms, s.backoff_initial_ms * power(s.backoff_factor, least(k.attempts, 60)))",
      "(s.backoff_initial_ms * power(s.backoff_factor, least(k.attempts, 60)))",
    ),
    tests: ["test/consumers.int.test.ts"],
  },
  {
    name: "fail: backoff one exponent too long (the first retry waits initialMs × factor)",
    edits: one(
      "src/sql/consume/failBatch.ts",
      "power(s.backoff_factor, least(k.attempts, 60))",
      "power(s.backoff_factor, least(k.attempts + 1, 60))",
    ),
    tests: ["test/consumers.int.test.ts"],
  },
  // --- seq, rewind, one key's pause (issue 15) --------------------------------------------
  {
    name: "advance: seqs against log order",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "row_number() OVER (PARTITION BY m.key ORDER BY m.tx, m.position)",
      "row_number() OVER (PARTITION BY m.key ORDER BY m.tx DESC, m.position DESC)",
    ),
    tests: ["test/seq.int.test.ts"],
  },
  {
    name: "advance: the key's seq counter not moved (seqs given twice)",
    edits: one("src/sql/advance/advanceSubscription.ts", "seq = k.seq + excluded.pending,", ""),
    tests: ["test/seq.int.test.ts"],
  },
  {
    name: "claim: a paused key is claimed",
    edits: one("src/sql/consume/claimBatch.ts", "\n        AND k.paused_at IS NULL", ""),
    tests: ["test/keyControl.int.test.ts"],
  },
  {
    name: "claim: replaying keys not after live ones (a replay starves live traffic)",
    // one scan in waiting order whatever the key replays (the live part takes replaying keys
    // too, the replaying part nothing): what the pick was before it was split in two
    edits: [
      {
        file: "src/sql/consume/claimBatch.ts",
        search: "(k.last_seq < k.replay_seq) IS ${replaying ? sql`TRUE` : sql`FALSE`}",
        replace: "${replaying ? sql`(k.last_seq < k.replay_seq) IS TRUE` : sql`true`}",
      },
      {
        file: "src/sql/consume/claimBatch.ts",
        search:
          "sql`least(${replayTake}, ${afterFair} - (SELECT count(*) FROM pick_live)\n        ${full ? sql`- (SELECT count(*) FROM pick_untenanted)` : sql``})`",
        replace: "sql`0`",
      },
    ],
    tests: ["test/rewind.int.test.ts"],
  },
  {
    name: "dispatch: paused keys counted as ready",
    edits: [
      {
        file: "src/sql/consume/readyKeys.ts",
        search: " AND k.paused_at IS NULL ORDER BY k.available_at",
        replace: " ORDER BY k.available_at",
        all: true,
      },
    ],
    tests: ["test/keyControl.int.test.ts"],
  },
  {
    name: "resumeKey: resumes every paused key of the subscription",
    edits: one(
      "src/sql/operate/pauseKey.ts",
      "WHERE s.name = ${subscription} AND k.subscription_id = s.id AND k.key = ${key}",
      "WHERE s.name = ${subscription} AND k.subscription_id = s.id",
    ),
    tests: ["test/keyControl.int.test.ts"],
  },
  {
    name: "rewind: one key's rewind requeues every key (JSON-path key)",
    edits: one(
      "src/sql/operate/rewindStage.ts",
      "\n        AND ((SELECT rewind_key FROM sub) IS NULL OR key = (SELECT rewind_key FROM sub))",
      "",
    ),
    tests: ["test/rewind.int.test.ts"],
  },
  {
    name: "rewind: one key's rewind requeues every key (stream key)",
    edits: [
      {
        file: "src/sql/operate/rewindStage.ts",
        search: "\n        AND ((SELECT rewind_key FROM sub) IS NULL OR key = (SELECT rewind_key FROM sub))",
        replace: "",
      },
      {
        file: "src/rewind.ts",
        search: 'oneStream: held.key === "stream" ? (held.rewindKey ?? undefined) : undefined,',
        replace: "oneStream: undefined,",
      },
    ],
    tests: ["test/rewind.int.test.ts"],
  },
  {
    name: "rewind: one key's rewind requeues every key (function key)",
    edits: [
      {
        file: "src/rewind.ts",
        search: "\n    .filter((row) => held.rewindKey === null || row.key === held.rewindKey);",
        replace: ";",
      },
    ],
    tests: ["test/rewind.int.test.ts"],
  },
  {
    name: "rewind: requeued events numbered against log order (a rewind that reorders)",
    edits: one(
      "src/sql/operate/rewindRequeue.ts",
      "row_number() OVER (PARTITION BY m.key ORDER BY m.tx, m.position),\n        m.tx, m.position, true",
      "row_number() OVER (PARTITION BY m.key ORDER BY m.tx DESC, m.position DESC),\n        m.tx, m.position, true",
    ),
    tests: ["test/rewind.int.test.ts"],
  },
  {
    name: "rewind: a leased key's queue replaced under its holder",
    edits: one(
      "src/sql/operate/rewindRequeue.ts",
      "WHEN l.lease_until > ${lockedNow} THEN 'append'",
      "WHEN false THEN 'append'",
    ),
    tests: ["test/rewind.int.test.ts"],
  },
  {
    name: "rewind: a key whose queue reaches back before the position is replaced (its earlier events lost)",
    edits: one(
      "src/sql/operate/rewindRequeue.ts",
      "WHEN head.position IS NOT NULL AND (head.tx, head.position) < (l.first_tx, l.first_position) THEN 'covered'",
      "WHEN false THEN 'covered'",
    ),
    tests: ["test/rewind.int.test.ts", "test/rewindUnderLoad.int.test.ts"],
  },
  {
    name: "rewind: replaced rows not passed by the ack cursor (a stale claim hands them out)",
    edits: one(
      "src/sql/operate/rewindRequeue.ts",
      "last_seq = CASE WHEN d.mode = 'replace' THEN d.seq ELSE k.last_seq END,",
      "last_seq = k.last_seq,",
    ),
    tests: ["test/rewind.int.test.ts"],
  },
  // --- a rewind in chunks that each commit (issue 30, item 4) -------------------------------
  {
    name: "rewind: the subscription's own advance not held (an advance numbers live events between two chunks)",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "WHERE id = ${subscriptionId} AND key <> 'function' AND rewind_token IS NULL AND ${asyncCommit}",
      "WHERE id = ${subscriptionId} AND key <> 'function' AND ${asyncCommit}",
    ),
    tests: ["test/rewindChunks.int.test.ts", "test/rewindUnderLoad.int.test.ts"],
  },
  {
    name: "rewind: a function-key advance not held (it numbers live events between two chunks)",
    edits: [
      {
        file: "src/sql/advance/advanceByFunction.ts",
        search: "AND s.rewind_token IS NULL AND ${asyncCommit}`",
        replace: "AND ${asyncCommit}`",
      },
      { file: "src/advance.ts", search: "if (first.rewinding !== null) {", replace: "if (false) {" },
    ],
    tests: ["test/rewindChunks.int.test.ts"],
  },
  {
    name: "rewind: a function-key advance that read before the rewind began writes during it",
    edits: one(
      "src/sql/advance/advanceByFunction.ts",
      "AND s.rewind_token IS NULL AND ${asyncCommit}`",
      "AND ${asyncCommit}`",
    ),
    tests: ["test/rewindChunks.int.test.ts"],
  },
  {
    name: "rewind: a key requeued by an earlier chunk taken for covered (the rest of its replay never queued)",
    edits: one(
      "src/sql/operate/rewindRequeue.ts",
      "CASE WHEN l.rewound_by = (SELECT mark FROM moved) THEN 'append'",
      "CASE WHEN false THEN 'append'",
    ),
    tests: ["test/rewindChunks.int.test.ts"],
  },
  {
    name: "rewind: one transaction (it holds the xmin horizon: every subscription's advance waits)",
    edits: one(
      "src/rewind.ts",
      "return { requeued: await runChunks(executor, held, options), subscriptionId: row.id };",
      "return { requeued: await executor.transaction((tx) => runChunks(tx, held, options)), subscriptionId: row.id };",
    ),
    tests: ["test/rewindChunks.int.test.ts"],
  },
  {
    name: "rewind: staged events requeued against log order where a key's events span two chunks",
    edits: one(
      "src/sql/operate/rewindRequeue.ts",
      "ORDER BY subscription_id, key, tx, position LIMIT ${limit}))",
      "ORDER BY subscription_id, key, tx DESC, position DESC LIMIT ${limit}))",
    ),
    tests: ["test/rewindChunks.int.test.ts"],
  },
  {
    // (a version bound that lets the cursor's own event in again changes nothing: the (tx,
    // position) bound keeps it out; the version bound is there for the index)
    name: "rewind: one stream's chunks skip the event after the cursor",
    edits: one("src/sql/operate/rewindStage.ts", "AND e.version > coalesce(", "AND e.version > 1 + coalesce("),
    tests: ["test/rewindChunks.int.test.ts"],
  },
  {
    name: "rewind: a second rewind begins while one is under way (it takes the first one's place)",
    edits: one(
      "src/sql/operate/rewind.ts",
      "WHERE s.id = t.id AND t.from_tx IS NOT NULL AND s.rewind_token IS NULL",
      "WHERE s.id = t.id AND t.from_tx IS NOT NULL",
    ),
    tests: ["test/rewindChunks.int.test.ts"],
  },
  {
    name: "rewind: an abandoned rewind never finished (its subscription never advances again)",
    edits: one(
      "src/advance.ts",
      'if (round.rewinding === "abandoned" && (await resumeRewind(',
      "if (false && (await resumeRewind(",
    ),
    tests: ["test/rewindChunks.int.test.ts"],
  },
  {
    name: "rewind: an abandoned rewind ended where it stopped (its keys' replays stop short)",
    edits: one(
      "src/rewind.ts",
      "  await runChunks(executor, held, options);\n  return true;",
      "  await executor.run(finishRewind(subscriptionId, token));\n  return true;",
    ),
    tests: ["test/rewindChunks.int.test.ts"],
  },
  {
    name: "rewind: a holder that lost its lease goes on as if it held it",
    edits: one(
      "src/rewind.ts",
      "if (chunk.held === 0) throw lostLease(leaseMs);\n    requeued += chunk.requeued;",
      "requeued += chunk.requeued;",
    ),
    tests: ["test/rewindChunks.int.test.ts"],
  },
  {
    name: "rewind: the staged events requeued without fresh statistics (every chunk sorts all that is left)",
    edits: one("src/rewind.ts", "  await executor.run(analyzeStaged());\n", ""),
    tests: ["test/rewindChunks.int.test.ts"],
  },
  {
    name: "rewind: a requeue chunk walks the staged events from the start (not from its cursor)",
    edits: one(
      "src/sql/operate/rewindRequeue.ts",
      "WHERE subscription_id = ${subscriptionId} ${past}",
      "WHERE subscription_id = ${subscriptionId}",
    ),
    tests: ["test/rewindPlans.int.test.ts"],
  },
  // No mutants for the requeue's `= ANY` lookups of key and queue rows beside their joins with
  // a CTE: they keep a plan seen once (a hash join over every key row, keys analyzed while
  // small) from coming back, and test/rewindPlans.int.test.ts could not make the planner
  // choose it again without them.
  // The rewind's begin is an UPDATE of the subscription row: it waits for an advance in
  // progress (which locks the row, with a SQL key or a function key) by nature, and the chunks
  // after it see what that advance enqueued (test/rewind.int.test.ts holds one open): no
  // mutant removes that wait without removing the begin.
  {
    name: "push: the webhook id ignores the queue entry (a replay reuses the id of the first delivery)",
    edits: one(
      "src/pushDelivery.ts",
      'present(events[0], "the batch\'s first event").seq,',
      'present(events[0], "the batch\'s first event").position,',
    ),
    tests: ["test/worker/rewind.worker.test.ts"],
  },
  // --- multi-key settle (a drain's acks and failures of several keys in one statement) -----
  {
    name: "settle: fence ignores lease token (a key taken over is acked by its stale holder)",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "WHERE l.lease_token = i.token AND l.lease_until > ${lockedNow}",
      "WHERE l.lease_until > ${lockedNow}",
    ),
    tests: ["test/multiKeyClaims.int.test.ts"],
  },
  {
    name: "settle: fence ignores lease expiry",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "WHERE l.lease_token = i.token AND l.lease_until > ${lockedNow}",
      "WHERE l.lease_token = i.token",
    ),
    tests: ["test/multiKeyClaims.int.test.ts"],
  },
  {
    name: "settle: a drain's settlements are taken for acks alone (its failures left unsettled)",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "const failing = settlements.some((x) => fail(x) !== undefined);",
      "const failing = false;",
    ),
    tests: ["test/multiKeyClaims.int.test.ts", "test/postpone.int.test.ts"],
  },
  {
    name: "settle: fence against the statement's start (now()), not each key's lock",
    edits: [
      {
        file: "src/sql/consume/settleKeys.ts",
        search: "i.head_position, i.postpone_ms, l.postponed, ${lockedNow} AS at,",
        replace: "i.head_position, i.postpone_ms, l.postponed, now() AS at,",
      },
      {
        file: "src/sql/consume/settleKeys.ts",
        search: "WHERE l.lease_token = i.token AND l.lease_until > ${lockedNow}",
        replace: "WHERE l.lease_token = i.token AND l.lease_until > now()",
      },
    ],
    tests: ["test/lockWaits.int.test.ts"],
  },
  {
    name: "settle: fence read before the key rows are locked (no FOR UPDATE)",
    edits: one("src/sql/consume/settleKeys.ts", "      ORDER BY k.key\n      FOR UPDATE\n", "      ORDER BY k.key\n"),
    tests: ["test/lockWaits.int.test.ts"],
  },
  {
    name: "settle: one key's live lease admits every key of the statement",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "WHERE l.lease_token = i.token AND l.lease_until > ${lockedNow}",
      "WHERE EXISTS (SELECT 1 FROM locked x JOIN settle y ON y.key = x.key WHERE x.lease_token = y.token AND x.lease_until > ${lockedNow})",
    ),
    tests: ["test/multiKeyClaims.int.test.ts"],
  },
  {
    name: "settle: a failed key is acked with the others (its events dropped)",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "WHERE f.error IS NULL AND k.subscription_id",
      "WHERE k.subscription_id",
    ),
    tests: ["test/multiKeyClaims.int.test.ts"],
  },
  {
    name: "settle: an ack deletes other keys' queue rows up to its cursor",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "AND q.subscription_id = a.subscription_id AND q.key = a.key",
      "AND q.subscription_id = a.subscription_id",
    ),
    tests: ["test/multiKeyClaims.int.test.ts"],
  },
  // the drain fails batches in settleKeys, consume() in failBatch: the same rules, each mutated
  {
    name: "settle: never dead (a drain retries a poison key for ever)",
    edits: [
      {
        file: "src/sql/consume/settleKeys.ts",
        search: "k.attempts + 1 >= s.max_attempts",
        replace: "false",
        all: true,
      },
    ],
    tests: ["test/multiKeyClaims.int.test.ts"],
  },
  {
    name: "settle: backoff not capped at maxMs",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "least(s.backoff_max_ms, s.backoff_initial_ms * power(s.backoff_factor, least(k.attempts, 60)))",
      "(s.backoff_initial_ms * power(s.backoff_factor, least(k.attempts, 60)))",
    ),
    tests: ["test/consumers.int.test.ts"],
  },
  {
    name: "settle: backoff one exponent too long (a drain's first retry waits initialMs × factor)",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "power(s.backoff_factor, least(k.attempts, 60))",
      "power(s.backoff_factor, least(k.attempts + 1, 60))",
    ),
    tests: ["test/consumers.int.test.ts"],
  },
  {
    name: "drain: a slow key holds back the acks of the keys claimed with it",
    edits: one(
      "src/consume.ts",
      "if (finished.length === 0 && (want === 0 || !lookAgain)) {",
      "if (running.size > 0 || (finished.length === 0 && (want === 0 || !lookAgain))) {",
    ),
    tests: ["test/multiKeyClaims.int.test.ts"],
  },
  {
    name: "drain: keysPerClaim ignored (one key per claim)",
    edits: one("src/consume.ts", "limits.keysPerClaim - running.size,", "1 - running.size,"),
    tests: ["test/multiKeyClaims.int.test.ts"],
  },
  // --- dead letters ----------------------------------------------------------------------
  {
    name: "release skip: acts on every dead key",
    edits: one(
      "src/sql/operate/releaseDeadKeys.ts",
      "SELECT k.subscription_id, k.key, k.last_seq FROM ${keys} k JOIN sub ON k.subscription_id = sub.id\n      WHERE ${which}",
      "SELECT k.subscription_id, k.key, k.last_seq FROM ${keys} k JOIN sub ON k.subscription_id = sub.id\n      WHERE k.dead_at IS NOT NULL",
    ),
    tests: ["test/advanceEdges.int.test.ts"],
  },
  {
    name: "release retry: acts on every dead key",
    edits: one(
      "src/sql/operate/releaseDeadKeys.ts",
      "WHERE s.name = ${subscription} AND k.subscription_id = s.id AND ${which}",
      "WHERE s.name = ${subscription} AND k.subscription_id = s.id AND k.dead_at IS NOT NULL",
    ),
    tests: ["test/consumers.int.test.ts"],
  },
  {
    name: "webhook ids: a replayed id is accepted",
    edits: one(
      "src/sql/consume/webhookIds.ts",
      "ON CONFLICT (id) DO NOTHING RETURNING id",
      "ON CONFLICT (id) DO UPDATE SET seen_at = now() RETURNING id",
    ),
    tests: ["test/webhookReplay.int.test.ts"],
  },
  // --- push delivery and signatures -------------------------------------------------------
  {
    name: "push: 4xx acks",
    edits: one(
      "src/pushDelivery.ts",
      "if (response.status < 200 || response.status > 299) {",
      "if (response.status < 200 || (response.status > 299 && response.status < 400) || response.status > 499) {",
    ),
    tests: ["test/push.int.test.ts"],
  },
  {
    name: "push: 3xx acks",
    edits: one(
      "src/pushDelivery.ts",
      "if (response.status < 200 || response.status > 299) {",
      "if (response.status < 200 || response.status > 399) {",
    ),
    tests: ["test/push.int.test.ts"],
  },
  {
    name: "push: no delivery timeout",
    edits: one(
      "src/pushDelivery.ts",
      "const signal = AbortSignal.any([timeout, context.signal]);",
      "const signal = context.signal;",
    ),
    tests: ["test/push.int.test.ts"],
  },
  {
    name: "signature: window not checked",
    edits: one(
      "src/webhookSignature.ts",
      '  if (Math.abs(now - Number(timestamp)) > (options.toleranceSeconds ?? 300))\n    return { ok: false, reason: "stale_timestamp" };\n',
      "",
    ),
    tests: ["test/webhookSignature.test.ts"],
  },
  {
    name: "signature: prefix compare",
    edits: one(
      "src/webhookSignature.ts",
      "  if (a.length !== b.length) return false;\n  let diff = 0;\n  // b[i] exists: the lengths are equal (and `^` would read a missing byte as 0 anyway)\n  for (const [i, byte] of a.entries()) diff |= byte ^ (b[i] ?? 0);",
      "  let diff = 0;\n  for (let i = 0; i < Math.min(a.length, b.length); i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);",
    ),
    tests: ["test/webhookSignature.test.ts"],
  },
  // --- scopes and tokens (src/http/auth.ts, src/tokens.ts, src/sql/operate/tokens.ts) -------------
  {
    name: "scopes: operate may do admin's work",
    edits: one("src/tokens.ts", 'operate: ["operate", "read"],', "operate: TOKEN_SCOPES,"),
    tests: ["test/worker/scopes.worker.test.ts"],
  },
  {
    name: "scopes: stream prefix ignored",
    edits: one(
      "src/tokens.ts",
      "return holder.streamPrefix === null || stream.startsWith(holder.streamPrefix);",
      "return true;",
    ),
    tests: ["test/worker/scopes.worker.test.ts"],
  },
  {
    name: "scopes: checked after the route ran",
    edits: one(
      "src/http/auth.ts",
      '    const refusal = scopeRefusal(principal, scope, c.req.param("stream"));\n    if (refusal) {\n      if (options.refuse) return options.refuse(c, refusal);\n      throw refusal;\n    }\n    await next();',
      '    await next();\n    const refusal = scopeRefusal(principal, scope, c.req.param("stream"));\n    if (refusal) {\n      if (options.refuse) return options.refuse(c, refusal);\n      throw refusal;\n    }',
    ),
    tests: ["test/worker/scopes.worker.test.ts"],
  },
  {
    name: "scopes: a route without requireScope needs no admin",
    edits: one(
      "src/http/auth.ts",
      "if (routes.length > 0 && !routes.some((route) => declaredScope(route.handler))) {",
      "if (false) {",
    ),
    tests: ["test/authMiddleware.int.test.ts"],
  },
  {
    name: "scopes: a 403 counted as a failed authentication",
    edits: one(
      "src/http/auth.ts",
      "    if (refusal) {\n      if (options.refuse)",
      "    if (refusal) {\n      await c.var.throttle.failed(c);\n      if (options.refuse)",
    ),
    tests: ["test/worker/scopes.worker.test.ts"],
  },
  {
    name: "tokens: revocation keeps the token working",
    edits: one(
      "src/sql/operate/tokens.ts",
      "DELETE FROM ${tokens} WHERE id = ${id}::uuid RETURNING id",
      "UPDATE ${tokens} SET name = name WHERE id = ${id}::uuid RETURNING id",
    ),
    tests: ["test/worker/scopes.worker.test.ts", "test/tokens.int.test.ts"],
  },
  {
    name: "tokens: every concurrent lookup writes the last use",
    edits: one(
      "src/sql/operate/tokens.ts",
      "AND (t.last_used_at IS NULL OR t.last_used_at < now()",
      "AND (found.last_used_at IS NULL OR found.last_used_at < now()",
    ),
    tests: ["test/tokens.int.test.ts"],
  },
  {
    name: "tokens: every lookup writes the last use",
    edits: one(
      "src/sql/operate/tokens.ts",
      "AND (t.last_used_at IS NULL OR t.last_used_at < now() - ${LAST_USED_RESOLUTION_S} * interval '1 second')",
      "",
    ),
    tests: ["test/tokens.int.test.ts"],
  },
  {
    name: "dashboard: a read session sees the action buttons",
    // every action form: the buttons and the rewind forms
    edits: [
      {
        file: "src/http/dashboard/layout.tsx",
        search: "if (useContext(CanOperate) !== true) return null;",
        replace: "",
        all: true,
      },
    ],
    tests: ["test/worker/scopes.worker.test.ts"],
  },
  {
    name: "dashboard: a session acts as admin whatever its token",
    edits: one(
      "src/http/dashboard/session.ts",
      "if (row.token_id === null) return BOOTSTRAP_ADMIN;",
      "return BOOTSTRAP_ADMIN;",
    ),
    tests: ["test/worker/scopes.worker.test.ts"],
  },
  {
    name: "dashboard: an append token logs in",
    edits: one("src/http/dashboard/routes.tsx", 'if (!scopesAllow(principal.scopes, "read")) {', "if (false) {"),
    tests: ["test/worker/scopes.worker.test.ts"],
  },
  {
    name: "dashboard: Retry or Skip on one key's row acts on every dead key",
    edits: one(
      "src/http/dashboard/routes.tsx",
      "releaseDeadLetters({ subscription, key, mode: action })",
      "releaseDeadLetters({ subscription, mode: action })",
    ),
    tests: ["test/browser/dashboard.browser.test.ts"],
  },
  {
    name: "dashboard: a key's rewind rewinds the whole subscription",
    edits: one("src/http/dashboard/routes.tsx", "rewind(subscription, { to, key })", "rewind(subscription, { to })"),
    tests: ["test/worker/rewind.worker.test.ts"],
  },
  // --- what a request is believed (issue 28) ------------------------------------------------
  {
    name: "dispatch: a self-invocation goes to the request's origin",
    edits: one(
      "src/http/dispatch.ts",
      "const request = new Request(new URL(`${basePath}${path}`, INTERNAL_ORIGIN), init);\n    return env.SELF ? env.SELF.fetch(request) : here(request);",
      "const request = new Request(new URL(`${basePath}${path}`, INTERNAL_ORIGIN), init);\n    void here;\n    return env.SELF ? env.SELF.fetch(request) : fetch(new URL(`${basePath}${path}`, origin), init);",
    ).concat(
      one(
        "src/http/api.ts",
        "{ here: (request) => app.fetch(request, c.env, c.executionCtx), basePath }",
        "{ here: (request) => app.fetch(request, c.env, c.executionCtx), basePath, origin: new URL(c.req.url).origin }",
      ),
      one(
        "src/http/dispatch.ts",
        "basePath: string },\n): Invoke {\n  const { here, basePath } = options;",
        "basePath: string; origin?: string },\n): Invoke {\n  const { here, basePath, origin = INTERNAL_ORIGIN } = options;",
      ),
    ),
    tests: ["test/serve/requestTrust.serve.test.ts"],
  },
  {
    name: "throttle: keyed by a header the client sets",
    edits: one("src/http/authThrottle.ts", "requestClient(c).address", 'c.req.header("cf-connecting-ip") ?? "unknown"'),
    tests: ["test/serve/requestTrust.serve.test.ts"],
  },
  {
    name: "forwarded: X-Forwarded-For believed from any peer",
    edits: one("src/node/forwarded.ts", "if (!trusted(peer)) return", "if (false) return"),
    tests: ["test/forwarded.test.ts", "test/serve/requestTrust.serve.test.ts"],
  },
  {
    name: "tokens: a revocation leaves the Node token cache alone",
    edits: one("src/http/api.ts", "c.env.CORQ_NODE?.tokenRevoked?.();", ""),
    tests: ["test/serve/requestTrust.serve.test.ts", "test/serve/tokenCache.serve.test.ts"],
  },
  {
    name: "client: '..' passes as a path segment",
    edits: one("src/client.ts", 'if (value === "" || value === "." || value === "..") {', "if (false) {"),
    tests: ["test/client.test.ts"],
  },
  {
    name: "api: a body's nesting not measured before it is parsed",
    edits: one("src/http/jsonBody.ts", "if (nestsDeeperThan(text, MAX_BODY_NESTING)) {", "if (false) {"),
    tests: ["test/worker/api.worker.test.ts"],
  },
  {
    name: "api: push URLs shown whole below the admin scope",
    edits: one(
      "src/http/api.ts",
      'if (!subscription.deliver || (principal && scopesAllow(principal.scopes, "admin")))',
      "if (true)",
    ),
    tests: ["test/worker/api.worker.test.ts"],
  },
  {
    name: "push: documentation ranges allowed",
    edits: one("src/privateAddress.ts", "  [0xc6336400, 24], // 198.51.100/24 documentation (TEST-NET-2)\n", ""),
    tests: ["test/privateAddress.test.ts"],
  },
  {
    name: "advance: the stream filter ignored",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "AND ${streamTaken(sql`e.stream`, sql`sub.streams`)} AS matches,",
      "AS matches,",
    ),
    tests: ["test/streamFilter.int.test.ts"],
  },
  {
    name: "advance: a stream prefix matched with LIKE (its _ and % as wildcards)",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "${stream} ^@ ANY(${prefixes})",
      "${stream} LIKE ANY(ARRAY(SELECT p || '%' FROM unnest(${prefixes}) p))",
    ),
    tests: ["test/streamFilter.int.test.ts"],
  },
  {
    name: "rewind: the stream filter ignored",
    edits: one(
      "src/sql/operate/rewindStage.ts",
      "AND ${streamTaken(sql`e.stream`, sql`sub.streams`)} AS matches,\n        ${keyExpression} AS key`;",
      "AS matches,\n        ${keyExpression} AS key`;",
    ),
    tests: ["test/streamFilter.int.test.ts"],
  },
  {
    name: "config: key path segments unbounded",
    edits: one(
      "src/config.ts",
      '(path) => path.split(".").length <= MAX_KEY_PATH_SEGMENTS,',
      '(path) => path.split(".").length <= 100_000,',
    ),
    tests: ["test/config.test.ts"],
  },
  {
    name: "claim: the live pick written as NOT (…), which the planner rewrites past the ready index",
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "(k.last_seq < k.replay_seq) IS ${replaying ? sql`TRUE` : sql`FALSE`}",
      "${replaying ? sql`(k.last_seq < k.replay_seq)` : sql`NOT (k.last_seq < k.replay_seq)`}",
    ),
    tests: ["test/plans.int.test.ts"],
  },
  {
    name: "settle: the acked keys' queue rows named only through the join (a plan made on an empty queue walks all of it)",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "\n        AND q.subscription_id = ${subscriptionId} AND q.key = ANY(${settled})",
      "",
    ),
    tests: ["test/plans.int.test.ts"],
  },
  {
    name: "ack: the key row named only through the fence's join",
    edits: one(
      "src/sql/consume/ackBatch.ts",
      "\n        AND k.subscription_id = ${lease.subscriptionId} AND k.key = ${lease.key}",
      "",
    ),
    tests: ["test/plans.int.test.ts"],
  },
  {
    name: "claim: the replaying part's unknown LIMIT without its constant bound (10 % of the ready keys assumed: JIT)",
    edits: one(
      "src/sql/common/literalLimit.ts",
      "sql`SELECT * FROM (${walk}) bounded LIMIT ${literalLimit(max)}`",
      "sql`SELECT * FROM (${walk}) bounded`",
    ),
    tests: ["test/plans.int.test.ts"],
  },
  {
    name: "advance by function: the watermark as a join filter (a walk of the log from its start)",
    edits: one(
      "src/sql/advance/advanceByFunction.ts",
      "AND (e.tx, e.position) > ((SELECT watermark_tx FROM ${subscriptions} WHERE id = ${subscriptionId}),\n                                (SELECT watermark_position FROM ${subscriptions} WHERE id = ${subscriptionId}))",
      "AND (e.tx, e.position) > (s.watermark_tx, s.watermark_position)",
    ),
    tests: ["test/plans.int.test.ts"],
  },
  {
    name: "erasure: a round with JIT as the server has it (compiled for seconds right after a bulk load)",
    edits: one("src/sql/log/eraseStream.ts", "set_config('jit', 'off', true) AS jit", "'on' AS jit"),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "retention: the queue probed as a semi-join (a read of the whole queue every chunk)",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "SELECT c.position FROM (SELECT DISTINCT position FROM candidates) c\n      CROSS JOIN LATERAL (SELECT 1 FROM ${queue} q WHERE q.position = c.position LIMIT 1) referenced",
      "SELECT DISTINCT q.position FROM ${queue} q WHERE q.position IN (SELECT position FROM candidates)",
    ),
    tests: ["test/plans.int.test.ts"],
  },
  {
    name: "nextDue: paused keys looked at too (the partial ready index no longer applies: every waiting key sorted)",
    edits: one(
      "src/sql/consume/nextDue.ts",
      "AND k.available_at > now() - ${recentMs} * interval '1 millisecond' AND k.paused_at IS NULL",
      "AND k.available_at > now() - ${recentMs} * interval '1 millisecond'",
    ),
    tests: ["test/plans.int.test.ts"],
  },
  {
    name: "readyKeys: the counts in no order (a Seq Scan or a bitmap of every ready key)",
    edits: [
      { file: "src/sql/consume/readyKeys.ts", search: " ORDER BY k.available_at LIMIT", replace: " LIMIT", all: true },
    ],
    tests: ["test/plans.int.test.ts"],
  },
  {
    name: "keys page: ready keys filtered as the ready index states them (read from it and sorted)",
    edits: one(
      "src/sql/inspect/listKeys.ts",
      "sql`AND ${pageFilter(options.status)}`",
      "sql`AND ${statusFilter[options.status]}`",
    ),
    tests: ["test/plans.int.test.ts"],
  },
  {
    name: "stats: the oldest pending without the partial index's predicate (a subscription's whole queue read)",
    edits: one(
      "src/sql/inspect/subscriptionStats.ts",
      "WHERE (q.subscription_id, q.position) >= (s.id, 0) AND q.position > 0",
      "WHERE (q.subscription_id, q.position) >= (s.id, 0)",
    ),
    tests: ["test/plans.int.test.ts"],
  },
  {
    name: "stats: the oldest pending as min(position) (erasure's index walked through the others' queues)",
    edits: one(
      "src/sql/inspect/subscriptionStats.ts",
      "SELECT CASE WHEN q.subscription_id = s.id THEN q.position END FROM ${queue} q\n          WHERE (q.subscription_id, q.position) >= (s.id, 0) AND q.position > 0\n          ORDER BY q.subscription_id, q.position LIMIT 1",
      "SELECT min(q.position) FROM ${queue} q WHERE q.subscription_id = s.id AND q.position > 0",
    ),
    tests: ["test/plans.int.test.ts"],
  },
  {
    name: "advance: the watermark as a join filter",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "WHERE (e.tx, e.position) > ((SELECT watermark_tx FROM sub), (SELECT watermark_position FROM sub))",
      "WHERE (e.tx, e.position) > (sub.watermark_tx, sub.watermark_position)",
    ),
    tests: ["test/plans.int.test.ts"],
  },
  // --- a user's own app: settings that make it useless said at once (issue 31, item 8) --------
  {
    name: "cli: a URL without its scheme sent on (a confusing 'no answer', exit 3)",
    edits: one("cli/run.ts", "if (!isHttpUrl(url)) {", "if (false) {"),
    tests: ["test/worker/cli.worker.test.ts", "test/cliScript.test.ts"],
  },
  {
    name: "serve: no warning at start without a usable admin token (then 401 to every call)",
    edits: one("src/node/serve.ts", "if (adminRefused) log(", "if (false) log("),
    tests: ["test/serve/adminWarning.serve.test.ts"],
  },
  // --- corq dev: the local stack around a user's Worker (issue 31, item 2) ---------------------
  {
    name: "corq dev: the cron never fires after the first tick (a key in backoff waits forever)",
    edits: one("cli/dev/localStack.ts", "if (running) return; // a slow run", "if (true) return; // a slow run"),
    tests: ["test/dev.int.test.ts"],
  },
  {
    name: "corq dev: miniflare's signal handler left in place (SIGTERM exits 143 before the stack is stopped)",
    edits: one("cli/dev/devCommand.ts", "ownSignals(); // again: the Worker's start added miniflare's", ""),
    tests: ["test/dev.int.test.ts"],
  },
  {
    name: "GET /health: an unreachable local Neon endpoint not named (a bare 503 again)",
    edits: one("src/http/api.ts", 'said?.message ?? "the database is unavailable"', '"the database is unavailable"'),
    tests: ["test/worker/unreachableEndpoint.worker.test.ts"],
  },
  // --- idle keys compacted, seqs never reused (issue 30) --------------------------------------
  {
    name: "idle keys: compaction ignores the threshold",
    edits: one(
      "src/sql/housekeeping/compactIdleKeys.ts",
      "AND k.active_at < now() - ${idleMs} * interval '1 millisecond'",
      "",
    ),
    tests: ["test/idleKeys.int.test.ts"],
  },
  {
    name: "idle keys: a paused key compacted",
    edits: one(
      "src/sql/housekeeping/compactIdleKeys.ts",
      "AND k.available_at IS NULL AND k.dead_at IS NULL AND k.paused_at IS NULL",
      "AND k.available_at IS NULL AND k.dead_at IS NULL",
    ),
    tests: ["test/idleKeys.int.test.ts"],
  },
  {
    name: "idle keys: the floor raised to the lowest seq compacted, not the highest",
    edits: one(
      "src/sql/housekeeping/compactIdleKeys.ts",
      "max(seq) AS seq FROM deleted",
      "min(seq) AS seq FROM deleted",
    ),
    tests: ["test/idleKeys.int.test.ts"],
  },
  {
    name: "idle keys: a key row the advance creates numbers from 1, not from the floor",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "SELECT moved.id, key, count(*), moved.key_seq_floor + count(*),",
      "SELECT moved.id, key, count(*), count(*),",
    ),
    tests: ["test/idleKeys.int.test.ts"],
  },
  {
    name: "idle keys: the advance reads the floor with its snapshot, not from the row it locked",
    edits: one(
      "src/sql/advance/advanceSubscription.ts",
      "SELECT moved.id, key, count(*), moved.key_seq_floor + count(*),",
      "SELECT moved.id, key, count(*), (SELECT key_seq_floor FROM corq.subscriptions WHERE id = moved.id) + count(*),",
    ),
    tests: ["test/idleKeys.int.test.ts"],
  },
  {
    name: "idle keys: a rewind numbers a compacted key from 1",
    edits: one("src/sql/operate/rewindRequeue.ts", "f.n, m.floor + f.n, m.floor + f.n, now()", "f.n, f.n, f.n, now()"),
    tests: ["test/idleKeys.int.test.ts"],
  },
  {
    name: "idle keys: a pause reads the floor without locking the subscription row",
    edits: one("src/sql/operate/pauseKey.ts", "ORDER BY id FOR SHARE", "ORDER BY id"),
    tests: ["test/idleKeys.int.test.ts"],
  },
  {
    name: "idle keys: compaction's predicate short of the idle index's (a scan of every key, every minute)",
    edits: one(
      "src/sql/housekeeping/compactIdleKeys.ts",
      "AND k.available_at IS NULL AND k.dead_at IS NULL AND k.paused_at IS NULL",
      "AND k.dead_at IS NULL AND k.paused_at IS NULL",
    ),
    tests: ["test/plans.int.test.ts"],
  },
  {
    name: "idle keys: compaction does not lock the subscription rows (a rewind's requeue loses the keys deleted meanwhile)",
    edits: one(
      "src/sql/housekeeping/compactIdleKeys.ts",
      "SELECT id FROM ${subscriptions} WHERE rewind_token IS NULL ORDER BY id FOR NO KEY UPDATE SKIP LOCKED",
      "SELECT id FROM ${subscriptions} WHERE rewind_token IS NULL ORDER BY id",
    ),
    tests: ["test/idleKeys.int.test.ts"],
  },
  {
    name: "idle keys: compaction deletes key rows of a subscription being rewound, between two chunks",
    edits: one(
      "src/sql/housekeeping/compactIdleKeys.ts",
      "FROM ${subscriptions} WHERE rewind_token IS NULL ORDER BY id",
      "FROM ${subscriptions} ORDER BY id",
    ),
    tests: ["test/rewindBeside.int.test.ts"],
  },
  {
    name: "retention: a rewind's range removed between two of its chunks (the lowest watermark ignores it)",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "        UNION ALL\n        SELECT rewind_from_tx, rewind_from_position - 1 FROM ${subscriptions} WHERE rewind_token IS NOT NULL\n",
      "",
    ),
    tests: ["test/rewindBeside.int.test.ts"],
  },
  {
    name: "retention: a chunk kept although a rewind marked after its removal may stage what it removed",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "WHERE s.rewind_token IS NOT NULL\n               AND",
      "WHERE false\n               AND",
    ),
    tests: ["test/rewindBeside.int.test.ts"],
  },
  {
    name: "erasure: a rewind's staged rows of erased events kept (they are queued again, events gone)",
    edits: one(
      "src/sql/log/eraseStream.ts",
      "WHERE EXISTS (SELECT 1 FROM ${subscriptions} s WHERE s.rewind_token IS NOT NULL)",
      "WHERE false",
    ),
    tests: ["test/rewindBeside.int.test.ts"],
  },
  {
    name: "rewind: a stage chunk of a rewind taken over counts as stale (its old holder reads again forever)",
    edits: one(
      "src/sql/operate/rewindStage.ts",
      "SELECT coalesce((SELECT erase_epoch FROM sub) <>\n        (SELECT erase_epoch FROM ${subscriptions} WHERE id = ${subscriptionId}), false) AS stale",
      "SELECT (SELECT erase_epoch FROM sub) IS DISTINCT FROM\n        (SELECT erase_epoch FROM ${subscriptions} WHERE id = ${subscriptionId}) AS stale",
    ),
    tests: ["test/rewindChunks.int.test.ts"],
  },
  {
    name: "erasure: a rewind's stage chunk that read before a round committed stages what the round erased",
    edits: one(
      "src/sql/operate/rewindStage.ts",
      "SELECT coalesce((SELECT erase_epoch FROM sub) <>",
      "SELECT coalesce(false AND (SELECT erase_epoch FROM sub) <>",
    ),
    tests: ["test/rewindBeside.int.test.ts"],
  },
  {
    name: "idle keys: compaction waits for a subscription whose row is held",
    edits: one(
      "src/sql/housekeeping/compactIdleKeys.ts",
      "ORDER BY id FOR NO KEY UPDATE SKIP LOCKED",
      "ORDER BY id FOR NO KEY UPDATE",
    ),
    tests: ["test/idleKeys.int.test.ts"],
  },
  {
    name: "housekeeping: the Worker's cron does not run it",
    edits: one("functions/createWorker.ts", "housekeeping: true,", "housekeeping: false,"),
    tests: ["test/worker/pipeline.worker.test.ts"],
  },
  {
    name: "housekeeping: serve's loop does not run it",
    edits: one("src/node/runner.ts", "corq.housekeeping().catch(", "Promise.resolve().catch("),
    tests: ["test/serve/housekeeping.serve.test.ts"],
  },
  {
    name: "housekeeping: serve ignores CORQ_KEY_IDLE_MS",
    edits: one("src/node/serve.ts", "      keyIdleMs: knobs.keyIdleMs,\n", ""),
    tests: ["test/serve/housekeeping.serve.test.ts"],
  },
  {
    name: "housekeeping: expired dashboard sessions kept",
    edits: one(
      "src/sql/housekeeping/pruneOperational.ts",
      "sessions AS (${pruneDashboardSessions} RETURNING 1)",
      "sessions AS (SELECT 1 WHERE false)",
    ),
    tests: ["test/idleKeys.int.test.ts"],
  },
  {
    name: "housekeeping: webhook ids kept past their window",
    edits: one(
      "src/sql/housekeeping/pruneOperational.ts",
      "webhooks AS (${forgetWebhookIds} RETURNING 1)",
      "webhooks AS (SELECT 1 WHERE false)",
    ),
    tests: ["test/idleKeys.int.test.ts"],
  },
  {
    name: "housekeeping: one chunk a pass whatever maxChunks says",
    edits: one("src/corq/housekeeping.ts", "if (compacted.deleted < CHUNK) break;", "break;"),
    tests: ["test/idleKeys.int.test.ts"],
  },

  // --- retention ---------------------------------------------------------------------------
  {
    name: "retention: removes events a queue still holds (a backlog, a paused or dead key)",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "WHERE NOT EXISTS (SELECT 1 FROM queued q WHERE q.position = c.position))",
      "WHERE true)",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "retention: removes events a subscription has not advanced past",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "AND (NOT EXISTS (SELECT 1 FROM low) OR (${tx}, ${position}) <= ((SELECT tx FROM low), (SELECT position FROM low))))",
      ")",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "retention: removes events younger than maxAgeMs",
    edits: one("src/sql/lifecycle/retention.ts", "(${createdAt} < p.cutoff", "(${createdAt} IS NOT NULL"),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "retention: the stream prefixes ignored",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "SELECT s.position, s.tx, ${streamTaken(sql`s.stream`, sql`p.streams`)} AS taken,",
      "SELECT s.position, s.tx, true AS taken,",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "retention: a change of prefixes does not sweep the log again",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "swept_to = CASE WHEN r.streams IS DISTINCT FROM ${textArray(policy.streams)} THEN 0 ELSE r.swept_to END,",
      "swept_to = r.swept_to,",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "retention: the sweep passes events not due yet (they are never removed later)",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "swept_to = coalesce((SELECT position FROM stop), (SELECT max(position) + 1 FROM swept), r.swept_to),",
      "swept_to = coalesce((SELECT max(position) + 1 FROM swept), r.swept_to),",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "retention: held events never checked again",
    edits: one("src/sql/lifecycle/retention.ts", "WHERE h.position > (SELECT held_after FROM policy)", "WHERE false"),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "retention: held events re-checked only in a pass's first chunk",
    edits: one(
      "src/corq/retention.ts",
      "if (recheck) recheckDue = row.recheck_more;",
      "if (recheck) recheckDue = false;",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "retention: a chunk does not wait for a rewind holding its subscription's row",
    edits: one("src/corq/retention.ts", "    await tx.run(lockSubscriptions());\n", ""),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "retention: events a rewind queued meanwhile removed (the check after the lock skipped)",
    edits: one("src/corq/retention.ts", "if (check?.requeued) throw new Requeued();", ""),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "retention: the option applied on every read (a PUT lost at once)",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "WHERE id = 1 AND r.option IS DISTINCT FROM ${optionJson(option)}",
      "WHERE id = 1",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "rewind: below the retention horizon not refused",
    edits: one("src/corq/retention.ts", "if (!row?.below) return;", "return;"),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "stats: a subscription created from the beginning after retention does not say where it started",
    edits: one(
      "src/sql/inspect/subscriptionStats.ts",
      "startsAt: row.start_horizon === null ? null : Number(row.start_horizon),",
      "startsAt: null,",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  // --- event schemas (runtime validation of delivered data) --------------------------------
  {
    name: "schemas: delivered data not validated",
    edits: one(
      "src/consume/handle.ts",
      "const events = validators ? await validated(claimed.events, validators) : claimed.events;",
      "const events = claimed.events;",
    ),
    tests: ["test/eventSchemas.int.test.ts", "test/worker/transactional.worker.test.ts"],
  },
  {
    name: "schemas: not validated on the drain path",
    edits: one(
      "src/consume.ts",
      "handle(consumer, claimed, { stopping: limits.abort })",
      "handle({ ...consumer, target: { ...consumer.target, code: consumer.target.code && { ...consumer.target.code, validators: null } } }, claimed, { stopping: limits.abort })",
    ),
    tests: ["test/eventSchemas.int.test.ts"],
  },
  {
    name: "schemas: not validated on the consume path",
    edits: one(
      "src/consume.ts",
      "const verdict = await handle(consumer, claimed);",
      "const verdict = await handle({ ...consumer, target: { ...consumer.target, code: consumer.target.code && { ...consumer.target.code, validators: null } } }, claimed);",
    ),
    tests: ["test/eventSchemas.int.test.ts"],
  },
  {
    name: "schemas: a transactional handler gets the unvalidated batch",
    edits: one(
      "src/consume/handle.ts",
      "handleInTransaction({ ...claimed, events }, ",
      "handleInTransaction(claimed, ",
    ),
    tests: ["test/eventSchemas.int.test.ts"],
  },
  {
    name: "schemas: the handler gets the data as stored, not what the schema output",
    edits: one(
      "src/eventSchemas.ts",
      'out.push({ ...event, data: result.value as DeliveredEvent["data"] });',
      "out.push(event);",
    ),
    tests: ["test/eventSchemas.int.test.ts"],
  },
  {
    name: "schemas: an async validator's verdict not awaited",
    edits: one(
      "src/eventSchemas.ts",
      "const result = pending instanceof Promise ? await pending : pending;",
      "const result = pending as StandardSchemaV1.Result<unknown>;",
    ),
    tests: ["test/eventSchemas.int.test.ts"],
  },
  {
    name: "schemas: the shared schemas given to no subscription",
    edits: one(
      "src/eventSchemas.ts",
      'const all = entries(shared, "schemas");',
      'const all = entries(undefined, "schemas");',
    ),
    tests: ["test/eventSchemas.int.test.ts"],
  },
  {
    name: "schemas: a subscription's own schemas lose to the shared ones",
    edits: one(
      "src/eventSchemas.ts",
      "{ ...Object.fromEntries(taken), ...own }",
      "{ ...own, ...Object.fromEntries(taken) }",
    ),
    tests: ["test/eventSchemas.int.test.ts"],
  },
  {
    name: "schemas: a schema for an event the subscription does not take accepted (a typo checks nothing)",
    edits: one("src/eventSchemas.ts", 'if (!events.includes("*") && !events.includes(name)) {', "if (false) {"),
    tests: ["test/eventSchemas.int.test.ts"],
  },
  {
    name: "schemas: startServe's shared schemas not given to its consumers",
    edits: one(
      "src/node/serve.ts",
      "const subscriptions = withSharedSchemas(options.subscriptions, options.schemas);",
      "const subscriptions = options.subscriptions;",
    ),
    tests: ["test/serve/eventSchemas.serve.test.ts"],
  },
  {
    name: "schemas: createWorker's shared schemas not given to its consumers",
    edits: one(
      "functions/createWorker.ts",
      "const subscriptions = withSharedSchemas(app.subscriptions, app.schemas);",
      "const subscriptions = app.subscriptions;",
    ),
    tests: ["test/worker/transactional.worker.test.ts"],
  },
  {
    name: "cron: no retention pass",
    edits: one("functions/createWorker.ts", "retainOnCron(env.CORQ_ADMIN_TOKEN, invoke)", "Promise.resolve()"),
    tests: ["test/worker/retention.worker.test.ts"],
  },
  {
    name: "serve: no retention pass in the loop",
    edits: one("src/node/runner.ts", "if (options.retention) retain(options.retention);", ""),
    tests: ["test/serve/retention.serve.test.ts"],
  },
  // --- idempotent appends -----------------------------------------------------------------
  {
    name: "idempotent append: a repeat within the window writes again",
    edits: one("src/sql/log/appendEvents.ts", "WHERE free AND NOT EXISTS (SELECT FROM prior)", "WHERE free"),
    tests: ["test/idempotentAppend.int.test.ts"],
  },
  {
    name: "idempotent append: another body under the key is replayed, not refused",
    edits: one("src/sql/log/appendEvents.ts", "fingerprint = ${fingerprint(idempotency.sent)} AS same", "true AS same"),
    tests: ["test/idempotentAppend.int.test.ts"],
  },
  {
    name: "idempotent append: no in-flight check (waits behind the first instead of 409)",
    edits: one(
      "src/sql/log/appendEvents.ts",
      "WHERE free AND NOT EXISTS (SELECT FROM prior)",
      "WHERE NOT EXISTS (SELECT FROM prior)",
    ),
    tests: ["test/idempotentAppend.int.test.ts"],
  },
  {
    name: "idempotent append: a row committed after the statement began does not stop its write",
    edits: one("src/sql/log/appendEvents.ts", "THEN corq.idempotency_race() END AS race", "THEN NULL END AS race"),
    tests: ["test/idempotentAppend.int.test.ts"],
  },
  {
    name: "HTTP: a replayed append without Idempotent-Replayed",
    edits: one("src/http/api.ts", '{ "idempotent-replayed": "true" }', "{}"),
    tests: ["test/worker/api.worker.test.ts"],
  },
  {
    name: "housekeeping: idempotency keys past the window are never pruned",
    edits: one(
      "src/sql/housekeeping/pruneOperational.ts",
      "DELETE FROM ${idempotencyKeys} WHERE created_at <= now() - ${idempotencyTtlMs} * interval '1 millisecond'",
      "DELETE FROM ${idempotencyKeys} WHERE false",
    ),
    tests: ["test/idempotentAppend.int.test.ts"],
  },
  // --- the test kit (corqueue/testing) ---------------------------------------------------------
  {
    name: "test kit: deliveredEvents gives every event of a batch the same seq",
    edits: one(
      "src/testing/deliveredEvents.ts",
      "seq: (options.firstSeq ?? 1) + index,",
      "seq: options.firstSeq ?? 1,",
    ),
    tests: ["test/testing.test.ts"],
  },
  {
    name: "test kit: the stand-in ctx.corq.append ignores expectedVersion (a redelivered greeter welcomes twice)",
    edits: one(
      "src/testing/standInCorq.ts",
      "if (expectedVersion !== undefined && (current ?? -1) !== expectedVersion) {",
      "if (false) {",
    ),
    tests: ["test/exampleHandlers.test.ts", "test/testing.test.ts"],
  },
  {
    name: "test kit: runUntilIdle calls it idle with keys still in backoff under waitForBackoff",
    edits: one(
      "src/testing/runUntilIdle.ts",
      "if (busy.length === 0 && (backoff.length === 0 || !options.waitForBackoff)) {",
      "if (busy.length === 0) {",
    ),
    tests: ["test/testing.int.test.ts"],
  },
  {
    name: "test kit: runUntilIdle calls it idle after a round that consumed, before advancing what handlers appended",
    edits: [
      { file: "src/testing/runUntilIdle.ts", search: "if (consumed > 0) continue;", replace: "" },
      {
        file: "src/testing/runUntilIdle.ts",
        search: "(s) => s.lag > 0 || s.keys.ready",
        replace: "(s) => s.keys.ready",
      },
    ],
    tests: ["test/testing.int.test.ts"],
  },
  {
    name: "test kit: runUntilIdle consumes the subscriptions another instance defined (orphaned here)",
    edits: one("src/testing/runUntilIdle.ts", ".filter((s) => !s.orphaned)", ""),
    tests: ["test/testing.int.test.ts"],
  },
  {
    name: "test kit: runUntilIdle has no maxBatches bound",
    edits: one("src/testing/runUntilIdle.ts", "if (batches.length >= maxBatches)", "if (false)"),
    tests: ["test/testing.int.test.ts"],
  },
  // --- mounted under a prefix (issue 31) ------------------------------------------------------
  {
    name: "mount: the fan-out and the retention pass invoke the user's root, not the prefix",
    edits: one(
      "src/http/dispatch.ts",
      "new URL(`${basePath}${path}`, INTERNAL_ORIGIN)",
      "new URL(path, INTERNAL_ORIGIN)",
    ),
    tests: ["test/worker/mount.worker.test.ts"],
  },
  {
    name: "mount: the session cookie's Path is the root",
    edits: one("src/http/dashboard/session.ts", 'path: c.var.basePath || "/",', 'path: "/",'),
    tests: ["test/worker/mount.worker.test.ts"],
  },
  {
    name: "mount: the dashboard's links, assets and forms at the root",
    edits: one(
      "src/http/dashboard/layout.tsx",
      "return (path) => underBase(basePath, path);",
      "return (path) => path;",
    ),
    tests: ["test/basePath.test.ts", "test/worker/mount.worker.test.ts"],
  },
  {
    name: "mount: the dashboard's redirects at the root",
    edits: one(
      "src/http/dashboard/routes.tsx",
      "const urlOf = (c: DashboardContext, path: string) => underBase(c.var.basePath, path);",
      "const urlOf = (_c: DashboardContext, path: string) => path;",
    ),
    tests: ["test/worker/mount.worker.test.ts"],
  },
  {
    name: "mount: an action's way back may leave the prefix",
    edits: one("src/http/dashboard/routes.tsx", "if (pathWithin(basePath, url.pathname) === null) return null;", ""),
    tests: ["test/worker/mount.worker.test.ts"],
  },
  {
    name: "mount: a path outside the prefix is served as if under it",
    edits: one("src/http/api.ts", "if (!outsideBase(basePath, c.req.raw)) return next();", "return next();"),
    tests: ["test/basePath.test.ts", "test/worker/mount.worker.test.ts"],
  },
  {
    name: "mount: serve ignores its basePath",
    edits: one("src/node/serve.ts", "open: () => opened, basePath });", "open: () => opened });"),
    tests: ["test/serve/mount.serve.test.ts"],
  },
  {
    name: "client: the path of its URL dropped (CORQ_URL=http://host/corq)",
    edits: one("src/client.ts", "new URL(`${prefix}${path}`, base.origin)", "new URL(path, base)"),
    tests: ["test/client.test.ts", "test/worker/mount.worker.test.ts"],
  },
  {
    name: "client: a replayed append not reported (Idempotent-Replayed ignored)",
    edits: one("src/client.ts", 'response.headers.get("idempotent-replayed") === "true"', "false"),
    tests: ["test/worker/cli.worker.test.ts"],
  },
  {
    name: "postpone: a postponement counts as a failed attempt",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "WHERE f.error IS NOT NULL AND NOT f.postpones AND",
      "WHERE f.error IS NOT NULL AND",
    ),
    tests: ["test/postpone.int.test.ts"],
  },
  {
    name: "postpone: no bound on the number of postponements",
    edits: one("src/sql/consume/settleKeys.ts", "AND l.postponed < ${MAX_POSTPONEMENTS}", ""),
    tests: ["test/postpone.int.test.ts"],
  },
  {
    name: "postpone: no bound on the time spent postponed",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "AND coalesce(l.postponed_since, ${lockedNow}) > ${lockedNow} - ${MAX_POSTPONED_MS} * interval '1 millisecond')",
      "AND true)",
    ),
    tests: ["test/postpone.int.test.ts"],
  },
  {
    name: "postpone: an ack (consume) keeps the postponements counted",
    edits: one("src/sql/consume/ackBatch.ts", "postponed = 0, postponed_since = NULL,", ""),
    tests: ["test/postpone.int.test.ts"],
  },
  {
    name: "postpone: an ack (drain) keeps the postponements counted",
    edits: one("src/sql/consume/settleKeys.ts", "postponed = 0, postponed_since = NULL,", ""),
    tests: ["test/postpone.int.test.ts"],
  },
  {
    name: "postpone: the key does not wait for retryAfterMs",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "THEN f.at + f.postpone_ms * interval '1 millisecond' END",
      "THEN f.at END",
    ),
    tests: ["test/postpone.int.test.ts"],
  },
  {
    name: "postpone: a receiver's Retry-After ignored",
    edits: one("src/pushDelivery.ts", "if (later) return later;", ""),
    tests: ["test/postpone.int.test.ts"],
  },
  {
    name: "postpone: a transactional handler's writes kept when it asks to come back later",
    edits: one(
      "src/consume/handleInTransaction.ts",
      "if (later) throw new Postponed(later);",
      "if (later) return later;",
    ),
    tests: ["test/postpone.int.test.ts"],
  },
  {
    name: "cap: maxLeasedKeys ignored by the claim",
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "ELSE corq.lease_room(sub.id, sub.max_leased_keys) END AS n",
      "ELSE 1000 END AS n",
    ),
    tests: ["test/leasedKeysCap.int.test.ts"],
  },
  {
    name: "cap: claims of a capped subscription do not take turns (leases counted on a stale snapshot)",
    edits: one("src/db/migrations.ts", 'PERFORM pg_advisory_xact_lock(736420201, \\"subscription\\");', ""),
    tests: ["test/leasedKeysCap.int.test.ts"],
  },
  {
    name: "cap: keys over the cap not explained in the keys view",
    edits: one(
      "src/sql/inspect/listKeys.ts",
      "if (row.max_leased_keys !== null && inFlight !== undefined && inFlight >= row.max_leased_keys)",
      "if (false)",
    ),
    tests: ["test/leasedKeysCap.int.test.ts"],
  },
  {
    name: "cap: the leases counted on the claim statement's snapshot (a STABLE function)",
    edits: one(
      "src/db/migrations.ts",
      'lease_room\\"(\\"subscription\\" integer, \\"cap\\" integer) RETURNS integer LANGUAGE plpgsql VOLATILE AS',
      'lease_room\\"(\\"subscription\\" integer, \\"cap\\" integer) RETURNS integer LANGUAGE plpgsql STABLE AS',
    ),
    tests: ["test/leasedKeysCap.int.test.ts"],
  },
  {
    name: "next due: a key that came due just now is not looked for (it waits for the next key or the safety net)",
    edits: one(
      "src/sql/consume/nextDue.ts",
      "k.available_at > now() - ${recentMs} * interval '1 millisecond'",
      "k.available_at > now()",
    ),
    tests: ["test/runner.int.test.ts"],
  },
  // --- stats and pages at scale ---------------------------------------------------------
  {
    name: "stats: a lag past the cap reported as counted (10,001)",
    edits: one(
      "src/sql/inspect/subscriptionStats.ts",
      "return { lag: Math.max(counted, span), lagEstimated: true };",
      "return { lag: counted, lagEstimated: true };",
    ),
    tests: ["test/stats.int.test.ts"],
  },
  {
    name: "stats: the log's size past the cap without Postgres' estimate",
    edits: one("src/sql/inspect/subscriptionStats.ts", "estimate < span * 0.9 ? estimate : span", "span"),
    tests: ["test/stats.int.test.ts"],
  },
  {
    name: "keys page: dead and paused pages in primary-key order (a walk a stale estimate picks)",
    edits: one("src/sql/inspect/listKeys.ts", 'status === "dead" || status === "paused";', 'status === "paused";'),
    tests: ["test/stats.int.test.ts"],
  },
  // --- fairness, rate limits, caps per tenant -------------------------------------------
  {
    name: "fairness: no fair part (oldest keys first whatever their tenant)",
    edits: one(
      "src/sql/consume/fairPick.ts",
      "AND (SELECT tenant FROM sub) IS NOT NULL AND NOT (SELECT paused FROM sub)",
      "AND false AND NOT (SELECT paused FROM sub)",
    ),
    tests: ["test/fairness.int.test.ts"],
  },
  {
    name: "fairness: tenants never marked served (the same tenant first every time)",
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "due_at = CASE WHEN l.took THEN clock_timestamp()",
      "due_at = CASE WHEN l.took THEN t.due_at",
    ),
    tests: ["test/fairness.int.test.ts"],
  },
  {
    name: "fairness: weights ignored",
    edits: one(
      "src/sql/consume/fairPick.ts",
      "coalesce((s.tenant_weights ->> w.tenant)::int, 1) AS weight",
      "1 AS weight",
    ),
    tests: ["test/fairness.int.test.ts"],
  },
  {
    name: "rate: every key gets what it wants (the bucket's grant not dealt)",
    edits: one(
      "src/sql/consume/rateLimits.ts",
      "least(w.want, greatest(0, r.granted - (sum(w.want) OVER (PARTITION BY w.bucket ORDER BY w.turn) - w.want))) AS share",
      "w.want AS share",
    ),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "rate: a bucket read without its turn (two claims grant the same room)",
    edits: one(
      "src/db/migrations.ts",
      // migration 0030's rate_take (0022's is no longer called)
      'AND b.scope = \\"bucket\\" FOR UPDATE;\\n  now_at := clock_timestamp();\\n  base := greatest(due, now_at);\\n  -- spacing',
      'AND b.scope = \\"bucket\\";\\n  now_at := clock_timestamp();\\n  base := greatest(due, now_at);\\n  -- spacing',
    ),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "rate: a limited key not told to wait (picked again at once)",
    edits: one(
      "src/sql/consume/rateLimits.ts",
      "SET available_at = s.wait_until, rate_waits = true",
      "SET rate_waits = true",
    ),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "tenant cap: ignored by the fair pick",
    edits: one(
      "src/sql/consume/fairPick.ts",
      "corq.tenant_room((SELECT id FROM sub), o.tenant, (SELECT max_leased_keys_per_tenant FROM sub))",
      "1000",
    ),
    tests: ["test/tenantCap.int.test.ts"],
  },
  {
    name: "tenant cap: keys without a tenant never taken under a cap",
    edits: one(
      "src/sql/consume/fairPick.ts",
      'WHERE k.key = oldest.key AND ${ready("k")} AND k.tenant IS NULL',
      'WHERE false AND k.key = oldest.key AND ${ready("k")} AND k.tenant IS NULL',
    ),
    tests: ["test/tenantCap.int.test.ts"],
  },
  ...idempotencyMutants,
  ...delaysMutants,
  ...alertsMutants,
  ...lifecycleMutants,
  ...flowControlMutants,
  ...fairnessMutants,
  ...connectionsMutants,
  ...poolerMutants,
  ...traceContextMutants,
  ...wakeUpsMutants,
  ...cellsMutants,
];
