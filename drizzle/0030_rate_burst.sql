-- Rate limits with a burst (docs/flow-control.md): takes up to `wanted` events' room from one
-- bucket (`bucket` of subscription `sub_id`) of a limit of `limit_events` per `limit_ms` with a
-- burst of `burst` (1..limit_events), and says how many it got and when the bucket has room for
-- one more. The generic cell rate algorithm: each event moves the bucket's theoretical arrival
-- time (tat) on by one emission interval, limit_ms / limit_events; an event has room while the
-- tat it would leave stays within (burst - 1) intervals of the clock, so a bucket idle or not
-- takes at most `burst` events at once, and any window of limit_ms sees at most
-- limit_events + burst - 1 (burst 1: limit_events, one every interval). 0022's tolerance was a
-- whole limit_ms (burst = limit_events): up to 2 x limit_events - 1 in one window.
-- Claims of one bucket take turns on its row (FOR UPDATE), and a VOLATILE function's query takes
-- a fresh snapshot (READ COMMITTED): the room the claim before it took is seen, which the claim
-- statement's own snapshot, taken before it waited, would not (as corq.lease_room, 0018). The
-- clock is read after the turn came. Room is counted in units of 1/limit_events ms so that an
-- idle bucket's `burst` is exact (no float step rounding it down to burst - 1).
CREATE FUNCTION "corq"."rate_take"("sub_id" integer, "bucket" text, "limit_events" integer, "limit_ms" integer, "burst" integer, "wanted" integer)
RETURNS TABLE ("granted" integer, "next_at" timestamptz) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  step_ms float8 := "limit_ms"::float8 / "limit_events";
  due timestamptz;
  now_at timestamptz;
  base timestamptz;
  room integer;
BEGIN
  INSERT INTO "corq"."rate_buckets" AS b (subscription_id, scope, tat) VALUES ("sub_id", "bucket", '-infinity')
    ON CONFLICT DO NOTHING;
  SELECT b.tat INTO due FROM "corq"."rate_buckets" b
    WHERE b.subscription_id = "sub_id" AND b.scope = "bucket" FOR UPDATE;
  now_at := clock_timestamp();
  base := greatest(due, now_at);
  -- events i = 0, 1, … have room while base + i intervals <= now + (burst - 1) intervals
  room := floor(("burst"::float8 * "limit_ms" - extract(epoch FROM base - now_at) * 1000 * "limit_events") / "limit_ms")::integer;
  "granted" := least(greatest("wanted", 0), greatest(room, 0));
  UPDATE "corq"."rate_buckets" b SET tat = base + "granted" * step_ms * interval '1 millisecond'
    WHERE b.subscription_id = "sub_id" AND b.scope = "bucket";
  -- room for one more once the new tat is within (burst - 1) intervals of the clock
  "next_at" := greatest(now_at, base + ("granted" - "burst" + 1) * step_ms * interval '1 millisecond');
  RETURN NEXT;
END $$;
--> statement-breakpoint
-- The previous release's claims (a Worker or process still running it while this one migrates)
-- call the 5-argument form: it takes room as the new one does with a burst of 1, from the same
-- buckets, so one limit holds across both during a deploy.
CREATE OR REPLACE FUNCTION "corq"."rate_take"("sub_id" integer, "bucket" text, "limit_events" integer, "limit_ms" integer, "wanted" integer)
RETURNS TABLE ("granted" integer, "next_at" timestamptz) LANGUAGE sql VOLATILE AS $$
  SELECT r.granted, r.next_at FROM "corq"."rate_take"("sub_id", "bucket", "limit_events", "limit_ms", 1, "wanted") r
$$;
--> statement-breakpoint
-- Every stored limit says its burst: 1, the new default (a limit set before this release let an
-- idle bucket take `events` at once; it now spaces them, as the docs always said it limits).
UPDATE "corq"."subscriptions" SET rate_limit = rate_limit || '{"burst": 1}'::jsonb
  WHERE rate_limit IS NOT NULL AND NOT (rate_limit ? 'burst');
