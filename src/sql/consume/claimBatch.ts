import { sql, type SQL } from "drizzle-orm";
import { events, keys, queue, subscriptions, tenants } from "../../db/schema.js";
import { eventColumns, noEventColumns, type EventRow } from "../common/eventColumns.js";
import { settleCtes, type Settlement, type SettledRow } from "./settleKeys.js";
import { asyncCommit } from "../common/asyncCommit.js";
import { lockedNow } from "../common/clock.js";
import { firstHeldSeq } from "../common/delays.js";
import { atMost, literalLimit } from "../common/literalLimit.js";
import { pickFair, pickUntenanted } from "./fairPick.js";
import { rateLimited } from "./rateLimits.js";

/** A key row or an event row (claimBatch's "Rows"): the columns of the other kind are null. */
export interface ClaimRow extends Partial<EventRow> {
  kind: "code" | "push";
  deliver: unknown;
  lease_ms: number;
  incarnation: string;
  // the queue row's seq and whether a rewind queued it (null without an event)
  seq: string | number | null;
  replay: boolean | null;
  // null when the subscription exists but no key was claimed (nothing ready, or paused)
  subscription_id: number | null;
  key: string | null;
  lease_token: string | null;
  attempts: number | null;
  dies: boolean | null;
  // the key was picked as replaying (working through events a rewind queued)
  replaying: boolean | null;
  // with settleAndClaim, on one row of the result: what became of each settlement whose
  // lease held (a settlement missing here found its lease gone)
  settled: SettledRow[] | null;
  // the database clock: when this claim (and the ack before it) happened
  now: Date;
  // keys picked but not leased: over their rate limit, they wait for its room (rateLimited)
  limited: number;
  // the subscription has no tenant, rate limit or cap: its next claims may be plain (ClaimBy.plain)
  plain: boolean | null;
  // the subscription has a tenant and no rate limit or cap: its next claims may be fair only (ClaimBy.fairOnly)
  fair_only: boolean | null;
  // when the claim took over an expired lease: that lease's span (for the activity record)
  expired_from: Date | null;
  expired_until: Date | null;
}

/**
 * Claims up to `limit` ready keys of a subscription and returns their next batches with the
 * event data, in ONE statement (docs/architecture.md, invariants 2 and 3):
 *   pick     the keys that have waited longest (partial index on available_at), each locked
 *            with FOR UPDATE SKIP LOCKED so concurrent consumers take different keys;
 *            ties (keys made ready by one advance) go by key, so the order is total; live
 *            keys go before replaying ones (a replay takes what live traffic leaves), at most
 *            `replayLimit` replaying ones are taken (pickKeys), and a paused key is never picked;
 *            With a tenant, live keys are first dealt round robin between the tenants with
 *            ready keys (fairPick.ts; maxLeasedKeysPerTenant caps each tenant's share there);
 *   room     with maxLeasedKeys, how many of the picked keys may be leased (the rest stay as
 *            they were: the subscription is at its cap);
 *   rate     with a rate limit, how many events each taken key may have from its bucket; a key
 *            with no room is not leased and waits for it (rateLimits.ts);
 *   claimed  for each key its own fresh lease token, and available_at = lease_until, so the
 *            key is claimable again exactly when its lease expires (a crashed consumer loses
 *            nothing); the lease records its holder and when it began. Each lease starts when
 *            ITS key was locked (lockedNow, read per row as
 *            the pick returns it), not when the statement began: with settlements the
 *            statement may first have waited for the settled keys' rows.
 *            Taking over an expired lease counts as a failed attempt; if that was the last
 *            one the key is dead-lettered here instead of handed out (a batch that crashes
 *            its consumer every time still ends in the dead letters). The lost lease's span
 *            is returned for the activity record;
 *   batch    each key's oldest queued events in seq order (log order, replays after what was
 *            queued before the rewind): batchSize of them, or only the head after a failure,
 *            so the event that keeps failing is pinned down. Read with the statement's
 *            snapshot, so only rows past the key row's ack cursor last_seq (its latest, locked
 *            version) count: a consumer that claimed, handled and acked this key while this
 *            statement waited is never repeated, nor are rows a rewind replaced.
 *            Each row is joined with its event in the same read (never a queue row without it),
 *            and a key an erasure round took events of after the snapshot (keys.erased moved
 *            on its locked row) gets no batch: it is given back (src/sql/log/eraseStream.ts).
 *            The batch stops before the first event delayed past the claim (deliverAt);
 *            a key whose head is such an event gets no batch and is given back until then.
 * Rows, in key order: per claimed key one key row (its lease; seq and the event columns null),
 * then one event row per event of its batch in seq order (key, seq, replay and the event; the
 * rest null). A key that died here, or got an empty batch, has its key row alone. One key row
 * with a null key when nothing was claimed; no row when there is no such subscription (of `kind`).
 */
export function claimBatch(subscription: string, by: ClaimBy = {}): SQL {
  return claim(subscription, by);
}

/**
 * Which subscriptions a claim may take (`kind: "push"`: push ones only), how many keys
 * (`limit`, default 1) and who claims (recorded on each lease as its holder).
 */
export interface ClaimBy {
  kind?: "push";
  limit?: number;
  holder?: string;
  /**
   * Of the `limit` keys, at most this many replaying ones (default: `limit`, no cap); live
   * keys are taken first either way. The drain passes what its replay share leaves
   * (src/consume.ts), so a large replay never fills a consumer while live keys wait.
   */
  replayLimit?: number;
  /**
   * The subscription had no tenant, rate limit, maxLeasedKeys or maxLeasedKeysPerTenant at the
   * drain's last claim (its key rows' `plain`): the statement leaves out the fair pick, the
   * rate limits and the caps — a third less planning (a Worker's claims are planned every
   * time: no prepared statements) and less to run. If the subscription has one of them by now,
   * the claim takes no key and its rows say `plain` false: claim again without it.
   */
  plain?: boolean;
  /**
   * The subscription had a tenant and no rate limit, maxLeasedKeys or maxLeasedKeysPerTenant at
   * the drain's last claim (its key rows' `fair_only`): the fair pick and the tenants' `served`
   * stay, the caps and the rate limits are left out. As with `plain`, a subscription that has
   * one of them by now gets no key from it, and its rows say so.
   */
  fairOnly?: boolean;
}

/**
 * Settles the batches just handled (acks and failures, each fenced by its own key's lease:
 * settleCtes) AND claims up to `limit` next keys, in ONE statement: a draining consumer pays
 * one round trip per claim of several keys instead of two per key. A settled key cannot be
 * picked again here (the statement's snapshot still sees it leased): `settled` tells the
 * caller which have more, to claim with the next statement. `limit` 0 only settles.
 * Lock order: the pick refers to `settled`, so the settled keys' row locks are taken (and
 * waited for) BEFORE the pick locks the next keys. The other way round an advancer holding a
 * settled key and waiting for a picked one deadlocks with us (seen in the benchmark).
 */
export function settleAndClaim(
  subscription: string,
  by: ClaimBy,
  settle: { subscriptionId: number; settlements: Settlement[] },
): SQL {
  return claim(subscription, by, settle);
}

function claim(subscription: string, by: ClaimBy, settle?: { subscriptionId: number; settlements: Settlement[] }): SQL {
  const { kind, limit = 1, holder, replayLimit = limit, plain = false } = by;
  const fairOnly = !plain && by.fairOnly === true;
  // neither caps nor rate limits in this statement: every picked key is granted
  const uncapped = plain || fairOnly;
  return sql`
    WITH ${settle ? sql`${settleCtes(settle.subscriptionId, settle.settlements, { freesRoom: !uncapped })},` : sql``}
    sub AS (
      SELECT id, kind, deliver, paused, batch_size, lease_ms, max_attempts, incarnation, max_leased_keys,
        tenant, tenant_weights, rate_limit, max_leased_keys_per_tenant,
        (tenant IS NULL AND rate_limit IS NULL AND max_leased_keys IS NULL AND max_leased_keys_per_tenant IS NULL) AS plain,
        (tenant IS NOT NULL AND rate_limit IS NULL AND max_leased_keys IS NULL AND max_leased_keys_per_tenant IS NULL) AS fair_only
      FROM ${subscriptions}
      WHERE name = ${subscription} ${kind ? sql`AND kind = ${kind}` : sql``} AND ${asyncCommit}
    ),
    ${pickKeys(limit, replayLimit, settle !== undefined, plain ? "plain" : fairOnly ? "fair" : "full")},
    ${uncapped ? plainGranted : capsAndRateLimits(limit, settle !== undefined)},
    claimed AS (
      UPDATE ${keys} k SET
        attempts = k.attempts + pick.expired::int,
        last_error = CASE WHEN pick.expired THEN 'lease expired before the batch was acked' ELSE k.last_error END,
        lease_token = CASE WHEN pick.dies THEN NULL ELSE gen_random_uuid() END,
        lease_until = CASE WHEN pick.dies THEN NULL ELSE pick.locked_at + sub.lease_ms * interval '1 millisecond' END,
        available_at = CASE WHEN pick.dies THEN NULL ELSE pick.locked_at + sub.lease_ms * interval '1 millisecond' END,
        dead_at = CASE WHEN pick.dies THEN pick.locked_at END,
        failed_position = CASE WHEN pick.dies THEN (
          SELECT q.position FROM ${queue} q WHERE q.subscription_id = k.subscription_id AND q.key = k.key
            AND q.seq > k.last_seq
          ORDER BY q.seq LIMIT 1) ELSE k.failed_position END,
        lease_holder = CASE WHEN NOT pick.dies THEN ${holder ?? null}::text END, leased_at = pick.locked_at,
        rate_waits = false
      FROM granted pick, sub
      WHERE k.subscription_id = pick.subscription_id AND k.key = pick.key
        -- the picked rows by primary key: a join alone may be planned as a scan of every key row
        AND k.subscription_id = (SELECT id FROM sub) AND k.key = ANY(ARRAY(SELECT key FROM granted ORDER BY key))
      RETURNING k.subscription_id, k.key, k.lease_token, k.attempts, pick.dies, k.last_seq, k.erased, pick.replaying,
                ${firstHeldSeq({ subscriptionId: sql`k.subscription_id`, key: sql`k.key`, after: sql`k.last_seq`, at: sql`pick.locked_at` })} AS held_from,
                least(CASE WHEN k.attempts > 0 THEN 1 ELSE sub.batch_size END, pick.share) AS batch_limit,
                CASE WHEN pick.expired THEN pick.leased_from END AS expired_from,
                CASE WHEN pick.expired THEN pick.lease_until END AS expired_until
    )${
      plain
        ? sql``
        : sql`,
    ${served(limit, settle !== undefined && !uncapped)}`
    }
    -- one row per claimed key (or one with a null key: nothing claimed), then its events, one
    -- row each: a key's lease and the subscription's settings come once, not on every event
    -- row (what a consumer parses per event is the event)
    SELECT sub.kind, sub.deliver, sub.lease_ms, sub.incarnation, c.subscription_id, c.key, c.lease_token, c.attempts,
      c.dies, c.replaying, now() AS now, ${uncapped ? sql`0` : sql`(SELECT count(*) FROM limited)::int`} AS limited, sub.plain, sub.fair_only,
      c.expired_from, c.expired_until,
      -- what was settled, once (on one row: not repeated on every key row)
      ${
        settle
          ? sql`CASE WHEN row_number() OVER () = 1 THEN (SELECT json_agg(settled ORDER BY key) FROM settled) END`
          : sql`NULL::json`
      } AS settled,
      NULL::bigint AS seq, NULL::boolean AS replay, ${noEventColumns}
    FROM sub
    LEFT JOIN claimed c ON true
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, c.key, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      e.seq, e.replay, ${eventColumns}
    FROM claimed c
    JOIN LATERAL (
      -- with the event (one snapshot for both): a queue row is never handed out without it
      SELECT q.seq, q.replay, e.* FROM ${queue} q JOIN ${events} e ON e.position = q.position
      WHERE q.subscription_id = c.subscription_id AND q.key = c.key AND NOT c.dies
        -- the snapshot may predate another consumer's ack of this key (or a rewind): skip
        -- what the cursor says is done
        AND q.seq > c.last_seq
        -- it may predate an erasure round that took events of this key (the locked row's
        -- counter moved): nothing of the key, which is given back (releaseLease)
        AND c.erased = (SELECT k0.erased FROM ${keys} k0 WHERE k0.subscription_id = c.subscription_id AND k0.key = c.key)
        -- not past a delayed event whose time has not come (src/sql/common/delays.ts): with it
        -- at the head the batch is empty and the key is given back until then (releaseLease)
        AND (c.held_from IS NULL OR q.seq < c.held_from)
      ORDER BY q.seq
      LIMIT c.batch_limit
    ) e ON true
    -- each key's row first (its seq is null), then its events in seq order
    ORDER BY key, seq NULLS FIRST`;
}

// A plain or fair-only claim leases every key it picked (the pick's LIMIT is the room: no cap, no
// rate limit), so the turns, the room and the rate-limit CTEs are left out of its text: less to plan.
const plainGranted = sql`granted AS (SELECT pick.*, NULL::bigint AS share FROM pick)`;

/**
 * `granted` (and `limited`) from the pick through the subscription's caps and rate limit:
 *   room     with maxLeasedKeys, how many of the picked keys may be leased (the first ones in
 *            pick order); for a capped subscription the claims take turns and count the live
 *            leases then (corq.lease_room, drizzle/0018). After the settlements: those lock their
 *            keys first;
 *   taken    the picked keys within the room (a key that dies here takes no lease, so no turn);
 *   granted  those with room under their rate limit (rateLimits.ts); `limited` the others.
 */
function capsAndRateLimits(limit: number, afterSettled: boolean): SQL {
  return sql`room AS (
      SELECT CASE WHEN sub.max_leased_keys IS NULL THEN ${limit}
        ELSE corq.lease_room(sub.id, sub.max_leased_keys) END AS n
      FROM sub ${afterSettled ? sql`WHERE (SELECT count(*) FROM settled) >= 0` : sql``}
    ),
    taken AS (
      SELECT * FROM (
        SELECT pick.*, row_number() OVER (PARTITION BY pick.dies ORDER BY pick.replaying, pick.waited_since, pick.key) AS turn
        FROM pick) p
      WHERE p.dies OR p.turn <= coalesce((SELECT n FROM room), 0)
    ),
    ${rateLimited()}`;
}

// fairness: the turns of the tenants the fair pick reached (fairPick.ts). Those it took keys of
// go to the back of the line (due now; served now if a key was leased); those it reached and
// took nothing of are due when their next key may be ready (corq.tenant_next_turn, which reads
// their keys afresh under the row's lock). The pick reached every tenant walked if it took
// fewer keys than its limit, else those up to the last it took keys of. A tenant row another
// statement is updating is left to it: claims never wait for each other here (SKIP LOCKED), and
// any other writer makes the turn now or earlier (tenantTurns.ts).
const served = (limit: number, afterSettled: boolean) => sql`turn_sets AS (
      SELECT ARRAY(SELECT DISTINCT tenant FROM pick WHERE tenant IS NOT NULL ORDER BY tenant) AS took,
        ARRAY(SELECT DISTINCT tenant FROM granted WHERE NOT dies AND tenant IS NOT NULL ORDER BY tenant) AS granted,
        ARRAY(SELECT o.tenant FROM fair_order o
              WHERE (SELECT count(*) FROM pick_fair) < ${limit}
                 OR o.turn <= (SELECT max(f.turn) FROM fair_order f
                               WHERE f.tenant = ANY(ARRAY(SELECT tenant FROM pick_fair ORDER BY tenant)))
              ORDER BY o.turn) AS reached
    ),
    served AS (
      UPDATE ${tenants} t SET
        due_at = CASE WHEN l.took THEN clock_timestamp()
          ELSE corq.tenant_next_turn(t.subscription_id, t.tenant, (SELECT lease_ms FROM sub),
                                    (SELECT max_leased_keys_per_tenant FROM sub)) END,
        served_at = CASE WHEN l.granted THEN clock_timestamp() ELSE t.served_at END
      FROM (SELECT n.tenant, n.tenant = ANY((SELECT took FROM turn_sets)::text[]) AS took,
                   n.tenant = ANY((SELECT granted FROM turn_sets)::text[]) AS granted
            FROM ${tenants} n
            WHERE n.subscription_id = (SELECT id FROM sub) AND (SELECT tenant FROM sub) IS NOT NULL
              AND n.tenant = ANY((SELECT took || reached FROM turn_sets)::text[])
              -- a tenant the settle gave room to has its turn from it (settleKeys.ts settled_room)
              ${afterSettled ? sql`AND n.tenant <> ALL(ARRAY(SELECT tenant FROM settled_room ORDER BY tenant))` : sql``}
            ORDER BY n.tenant
            FOR UPDATE OF n SKIP LOCKED) l
      -- by primary key (= ANY): a join alone was planned as a scan of every tenant row (1,000–3,000 rows)
      WHERE t.subscription_id = (SELECT id FROM sub) AND t.tenant = ANY((SELECT took || reached FROM turn_sets)::text[])
        AND t.tenant = l.tenant
    )`;

/**
 * The pick: up to `limit` ready keys, live ones first, then at most `replayLimit` replaying
 * ones (a key is replaying while last_seq < replay_seq), each part walking the partial ready
 * index (subscription, replaying, available_at, key) in order of waiting time, ties by key.
 * Two locking scans, not one sorted by "replaying" first: the second's LIMIT is what the first
 * left of `limit`, capped — so a claim never locks a replaying key it will not take.
 * Each part names the index's second column, the expression `(last_seq < replay_seq)`, as it
 * is — `IS TRUE` / `IS FALSE` of it — so that column is part of the index condition and the
 * walk comes out in (available_at, key) order (invariant 14). Never `NOT (last_seq < replay_seq)`:
 * the planner rewrites it to `last_seq >= replay_seq`, which matches no index column, and the
 * pick then read and sorted every ready key per claim (2–7 s at 1M keys; docs/architecture.md,
 * "The fast plan is the only plan"). test/plans.int.test.ts holds both parts to the index walk.
 * A subscription with a tenant first takes its live keys fairly (pickFair); the live part then
 * fills what that left, oldest first (work-conserving: a tenant alone gets every consumer).
 * A plain claim (ClaimBy.plain) is the live and replaying parts alone, each taking keys only
 * while the subscription is still plain.
 */
function pickKeys(limit: number, replayLimit: number, afterSettled: boolean, parts: "plain" | "fair" | "full"): SQL {
  const columns = sql`k.subscription_id, k.key, k.tenant, k.pending, k.attempts, k.lease_token IS NOT NULL AS expired, ${lockedNow} AS locked_at,
             -- (never dead on nothing: an erasure may have emptied the key under its lease)
             (k.lease_token IS NOT NULL AND k.attempts + 1 >= sub.max_attempts AND k.pending > 0) AS dies,
             k.lease_until, k.lease_until - sub.lease_ms * interval '1 millisecond' AS leased_from,
             k.available_at AS waited_since`;
  const settledFirst = afterSettled ? sql`AND (SELECT count(*) FROM settled) >= 0` : sql``;
  // a plain (fair-only) claim of a subscription that is not plain (fair only) by now takes nothing
  const stillAsAssumed =
    parts === "plain"
      ? sql`AND (SELECT plain FROM sub)`
      : parts === "fair"
        ? sql`AND (SELECT fair_only FROM sub)`
        : sql``;
  const part = (replaying: boolean, take: SQL, except: SQL = sql``) => sql`
      SELECT ${columns}, ${sql.raw(String(replaying))} AS replaying
      FROM ${keys} k, sub
      -- scalar subqueries, not a join: the planner then walks the partial index in
      -- available_at order and stops at the first unlocked rows (a join sorted every ready key)
      WHERE k.subscription_id = (SELECT id FROM sub) AND k.available_at <= now() AND NOT (SELECT paused FROM sub)
        AND k.paused_at IS NULL AND (k.last_seq < k.replay_seq) IS ${replaying ? sql`TRUE` : sql`FALSE`}
        ${settledFirst} ${stillAsAssumed} ${except}
      ORDER BY k.available_at, k.key
      LIMIT ${take}
      FOR UPDATE OF k SKIP LOCKED`;
  const replayTake = Math.max(0, Math.min(replayLimit, limit));
  if (parts === "plain")
    return sql`
    pick_live AS (${part(false, literalLimit(limit))}),
    pick_replaying AS (${atMost(replayTake, part(true, sql`least(${replayTake}, ${limit} - (SELECT count(*) FROM pick_live))`))}),
    pick AS (SELECT * FROM pick_live UNION ALL SELECT * FROM pick_replaying)`;
  // a fair-only claim has no cap per tenant: no CASE for it, and no walk of untenanted keys
  const full = parts === "full";
  const capped = sql`(SELECT max_leased_keys_per_tenant FROM sub) IS NOT NULL`;
  const afterFair = sql`${limit} - (SELECT count(*) FROM pick_fair)`;
  return sql`
    ${pickFair(limit, columns, sql`${settledFirst} ${stillAsAssumed}`)},
    pick_live AS (${atMost(
      limit,
      part(
        false,
        // with a cap per tenant, only the fair part takes tenants' keys (it honours the caps)
        full ? sql`CASE WHEN ${capped} THEN 0 ELSE ${afterFair} END` : afterFair,
        // a claim's own locks do not make SKIP LOCKED skip: the keys the fair part took are named
        sql`AND k.key <> ALL(ARRAY(SELECT key FROM pick_fair ORDER BY key))`,
      ),
    )}),
    ${full ? sql`${pickUntenanted(limit, columns, settledFirst)},` : sql``}
    pick_replaying AS (${atMost(
      replayTake,
      part(
        true,
        sql`least(${replayTake}, ${afterFair} - (SELECT count(*) FROM pick_live)
        ${full ? sql`- (SELECT count(*) FROM pick_untenanted)` : sql``})`,
      ),
    )}),
    pick AS (SELECT * FROM pick_fair UNION ALL SELECT * FROM pick_live
      ${full ? sql`UNION ALL SELECT * FROM pick_untenanted` : sql``} UNION ALL SELECT * FROM pick_replaying)`;
}
