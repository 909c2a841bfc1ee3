CREATE TABLE "corq"."subscription_counters" (
	"subscription_id" integer PRIMARY KEY NOT NULL,
	"batches_expired" bigint DEFAULT 0 NOT NULL,
	"batches_postponed" bigint DEFAULT 0 NOT NULL,
	"keys_dead_lettered" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
-- Edited by hand: the trigger that keeps subscription_counters (drizzle cannot express it).
-- What a key row's update says happened (the trigger's WHEN holds one of them at least):
--   a batch expired   a claim (the only writer of leased_at) took over a lease that was
--                     still set: it had run out without an outcome (claimBatch.ts, pick.expired)
--   postponed         a "come back later" answer within its bounds (settleKeys.ts: postponed + 1;
--                     every other writer sets it to 0)
--   dead-lettered     dead_at set where it was null: a failure on the last attempt (settle,
--                     failBatch) or an expired lease on the last one (the claim's `dies`)
-- An AFTER ROW trigger runs at the end of its statement, after every key row of it was locked
-- and written; a statement is one subscription's, so it locks one counter row.
CREATE FUNCTION "corq"."count_key_outcomes"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO corq.subscription_counters AS c (subscription_id, batches_expired, batches_postponed, keys_dead_lettered)
  VALUES (NEW.subscription_id,
    (OLD.lease_token IS NOT NULL AND NEW.leased_at IS DISTINCT FROM OLD.leased_at)::int,
    (NEW.postponed > OLD.postponed)::int,
    (OLD.dead_at IS NULL AND NEW.dead_at IS NOT NULL)::int)
  ON CONFLICT (subscription_id) DO UPDATE SET
    batches_expired = c.batches_expired + excluded.batches_expired,
    batches_postponed = c.batches_postponed + excluded.batches_postponed,
    keys_dead_lettered = c.keys_dead_lettered + excluded.keys_dead_lettered;
  RETURN NULL;
END $$;
--> statement-breakpoint
-- Only updates that name one of the three columns are looked at (the advance's upsert names
-- none), and of those only the rows the WHEN holds for run the function: an ack or a claim of
-- a ready key evaluates the WHEN and writes nothing.
CREATE TRIGGER "keys_outcome_counters" AFTER UPDATE OF "leased_at", "postponed", "dead_at" ON "corq"."keys"
  FOR EACH ROW
  WHEN ((OLD.lease_token IS NOT NULL AND NEW.leased_at IS DISTINCT FROM OLD.leased_at)
    OR NEW.postponed > OLD.postponed
    OR (OLD.dead_at IS NULL AND NEW.dead_at IS NOT NULL))
  EXECUTE FUNCTION "corq"."count_key_outcomes"();
