-- Rate limits with a burst (docs/flow-control.md): takes up to `wanted` events' room from one
-- bucket (`bucket` of subscription `sub_id`) of a limit of `limit_events` per `limit_ms` with a
-- burst of `burst` (1..limit_events), and says how many it got and when the bucket has room for
-- one more. No window of limit_ms sees more than limit_events starts; the burst is how many may
-- start at once. Two rules, both held:
--   spacing  the generic cell rate algorithm: each event moves the bucket's theoretical arrival
--            time (tat) on by one emission interval, limit_ms / limit_events; an event has room
--            while the tat it would leave stays within (burst - 1) intervals of the clock, so a
--            bucket, idle or not, takes at most `burst` events at once. With a burst of 1 this
--            alone holds every window to limit_events (one every interval).
--   window   with a burst above 1 the spacing alone would let a window see limit_events +
--            burst - 1 (the burst, then the refill): the starts of the last limit_ms and one
--            interval (at most 1 s) are kept (recent_at / recent_count: one entry per call that
--            took room, oldest first) and an event has room only while fewer than limit_events of
--            them are inside that span, ending now. The interval more is for the receiver: a
--            burst that reaches it up to that much later than the next burst does still does not
--            put two bursts in one of its windows.
-- 0022's tolerance was a whole limit_ms and had no window: up to 2 x limit_events - 1 in one.
-- Claims of one bucket take turns on its row (FOR UPDATE), and a VOLATILE function's query takes
-- a fresh snapshot (READ COMMITTED): the room the claim before it took is seen, which the claim
-- statement's own snapshot, taken before it waited, would not (as corq.lease_room, 0018). The
-- clock is read after the turn came. Room is counted in units of 1/limit_events ms so that an
-- idle bucket's `burst` is exact (no float step rounding it down to burst - 1).
ALTER TABLE "corq"."rate_buckets" ADD COLUMN "recent_at" timestamp with time zone[];--> statement-breakpoint
ALTER TABLE "corq"."rate_buckets" ADD COLUMN "recent_count" integer[];--> statement-breakpoint
CREATE FUNCTION "corq"."rate_take"("sub_id" integer, "bucket" text, "limit_events" integer, "limit_ms" integer, "burst" integer, "wanted" integer)
RETURNS TABLE ("granted" integer, "next_at" timestamptz) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  step_ms float8 := "limit_ms"::float8 / "limit_events";
  -- the span a start is counted in: limit_ms, and an interval (at most 1 s) for the receiver's jitter
  span interval := ("limit_ms" + least("limit_ms"::float8 / "limit_events", 1000)) * interval '1 millisecond';
  due timestamptz;
  now_at timestamptz;
  base timestamptz;
  room integer;
  starts_at timestamptz[];
  starts_n integer[];
  in_window integer := 0;
  window_next timestamptz;
BEGIN
  INSERT INTO "corq"."rate_buckets" AS b (subscription_id, scope, tat) VALUES ("sub_id", "bucket", '-infinity')
    ON CONFLICT DO NOTHING;
  SELECT b.tat, b.recent_at, b.recent_count INTO due, starts_at, starts_n FROM "corq"."rate_buckets" b
    WHERE b.subscription_id = "sub_id" AND b.scope = "bucket" FOR UPDATE;
  now_at := clock_timestamp();
  base := greatest(due, now_at);
  -- spacing: events i = 0, 1, … have room while base + i intervals <= now + (burst - 1) intervals
  room := floor(("burst"::float8 * "limit_ms" - extract(epoch FROM base - now_at) * 1000 * "limit_events") / "limit_ms")::integer;
  IF "burst" > 1 THEN
    -- window: the starts still inside the span that ends now (a start at t leaves it at t + span)
    SELECT coalesce(array_agg(u.started ORDER BY u.started), '{}'), coalesce(array_agg(u.n ORDER BY u.started), '{}'),
           coalesce(sum(u.n), 0)::integer
      INTO starts_at, starts_n, in_window
      FROM unnest(coalesce(starts_at, '{}'), coalesce(starts_n, '{}')) AS u(started, n)
      WHERE u.started > now_at - span;
    room := least(room, "limit_events" - in_window);
  END IF;
  "granted" := least(greatest("wanted", 0), greatest(room, 0));
  IF "burst" > 1 AND "granted" > 0 THEN
    starts_at := starts_at || now_at;
    starts_n := starts_n || "granted";
    in_window := in_window + "granted";
  END IF;
  IF "burst" > 1 AND in_window >= "limit_events" THEN
    -- room for one more once enough of the oldest starts have left the window
    SELECT c.started + span INTO window_next
      FROM (SELECT u.started, sum(u.n) OVER (ORDER BY u.started) AS gone FROM unnest(starts_at, starts_n) AS u(started, n)) c
      WHERE in_window - c.gone < "limit_events" ORDER BY c.started LIMIT 1;
  END IF;
  UPDATE "corq"."rate_buckets" b SET tat = base + "granted" * step_ms * interval '1 millisecond',
      recent_at = CASE WHEN "burst" > 1 THEN starts_at END, recent_count = CASE WHEN "burst" > 1 THEN starts_n END
    WHERE b.subscription_id = "sub_id" AND b.scope = "bucket";
  -- room for one more once the new tat is within (burst - 1) intervals of the clock, and the window has some
  "next_at" := greatest(now_at, base + ("granted" - "burst" + 1) * step_ms * interval '1 millisecond',
                        coalesce(window_next, now_at));
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
