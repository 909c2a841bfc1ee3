-- Edited by hand: UNLOGGED like activity (drizzle cannot express it); the trigger below keeps it.
CREATE UNLOGGED TABLE "corq"."batch_durations" (
	"subscription_id" integer NOT NULL,
	"outcome" text NOT NULL,
	"le" double precision NOT NULL,
	"batches" bigint NOT NULL,
	"events" bigint NOT NULL,
	"seconds" double precision NOT NULL,
	CONSTRAINT "batch_durations_pkey" PRIMARY KEY("subscription_id","outcome","le")
);
--> statement-breakpoint
-- Every batch recorded in activity is counted into its histogram bucket: the smallest bound
-- (seconds) at or above its duration, Infinity above the last. The bounds are
-- BATCH_DURATION_BUCKETS in src/metrics.ts (test/metrics.int.test.ts checks they agree).
-- Rows go in key order, so concurrent writers lock the counters in one order.
CREATE FUNCTION "corq"."count_batch_durations"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO corq.batch_durations AS d (subscription_id, outcome, le, batches, events, seconds)
  SELECT a.subscription_id, a.outcome,
    coalesce((SELECT min(b) FROM unnest('{0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5,5,10,30,60,300}'::float8[]) b
              WHERE b >= a.duration), 'Infinity'::float8),
    count(*), sum(a.events), sum(a.duration)
  FROM (SELECT subscription_id, outcome, events,
          greatest(0, extract(epoch FROM finished_at - started_at))::float8 AS duration FROM added) a
  GROUP BY 1, 2, 3
  ORDER BY 1, 2, 3
  ON CONFLICT (subscription_id, outcome, le) DO UPDATE
    SET batches = d.batches + excluded.batches, events = d.events + excluded.events,
        seconds = d.seconds + excluded.seconds;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER "activity_batch_durations" AFTER INSERT ON "corq"."activity"
  REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION "corq"."count_batch_durations"();
