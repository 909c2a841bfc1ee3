CREATE TABLE "corq"."rate_buckets" (
	"subscription_id" integer NOT NULL,
	"scope" text NOT NULL,
	"tat" timestamp with time zone NOT NULL,
	CONSTRAINT "rate_buckets_pkey" PRIMARY KEY("subscription_id","scope")
);
--> statement-breakpoint
ALTER TABLE "corq"."keys" ADD COLUMN "rate_waits" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "rate_limit" jsonb;--> statement-breakpoint
-- Rate limits: takes up to `wanted` events' room from one bucket (`bucket` of subscription
-- `sub_id`) of a limit of `limit_events` per `limit_ms`, and says how many it got and when the
-- bucket has room for one more. The generic cell rate algorithm: each event moves the bucket's
-- theoretical arrival time (tat) on by limit_ms / limit_events; there is room while tat stays
-- within limit_ms of the clock (a burst of limit_events at once, limit_events per limit_ms on
-- average). Claims of one bucket take turns on its row (FOR UPDATE), and a VOLATILE function's
-- query takes a fresh snapshot (READ COMMITTED): the room the claim before it took is seen,
-- which the claim statement's own snapshot, taken before it waited, would not (as
-- corq.lease_room, 0018). The clock is read after the turn came.
CREATE FUNCTION "corq"."rate_take"("sub_id" integer, "bucket" text, "limit_events" integer, "limit_ms" integer, "wanted" integer)
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
  room := floor(("limit_ms" - extract(epoch FROM base - now_at) * 1000) / step_ms)::integer;
  "granted" := least(greatest("wanted", 0), greatest(room, 0));
  UPDATE "corq"."rate_buckets" b SET tat = base + "granted" * step_ms * interval '1 millisecond'
    WHERE b.subscription_id = "sub_id" AND b.scope = "bucket";
  -- room for one more once tat + one step is within limit_ms of the clock
  "next_at" := greatest(now_at, base + (("granted" + 1) * step_ms - "limit_ms") * interval '1 millisecond');
  RETURN NEXT;
END $$;