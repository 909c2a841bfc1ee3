ALTER TABLE "corq"."subscriptions" ADD COLUMN "max_leased_keys" integer;--> statement-breakpoint
-- maxLeasedKeys: how many more keys a claim of subscription `subscription` may lease now, under
-- `cap`. Claims of a capped subscription take turns (a transaction-scoped advisory lock, held to
-- the end of the claim's statement), and the leases are counted AFTER the turn came: a VOLATILE
-- function's queries each take a fresh snapshot (READ COMMITTED), so the count sees every lease
-- the claims before it committed — the claim statement's own snapshot, taken before it waited,
-- would not, and two claims could each see room for the same last slot. Leases are counted up to
-- `cap` in the ready index's order (a leased key's available_at is its lease's end), then among
-- the paused keys.
CREATE FUNCTION "corq"."lease_room"("subscription" integer, "cap" integer) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  leased integer;
BEGIN
  PERFORM pg_advisory_xact_lock(736420201, "subscription");
  SELECT count(*) INTO leased FROM (
    (SELECT 1 FROM "corq"."keys" k WHERE k.subscription_id = "subscription" AND (k.last_seq < k.replay_seq) IS FALSE
       AND k.available_at > clock_timestamp() AND k.paused_at IS NULL AND k.lease_until > clock_timestamp()
     ORDER BY k.available_at LIMIT "cap")
    UNION ALL
    (SELECT 1 FROM "corq"."keys" k WHERE k.subscription_id = "subscription" AND (k.last_seq < k.replay_seq) IS TRUE
       AND k.available_at > clock_timestamp() AND k.paused_at IS NULL AND k.lease_until > clock_timestamp()
     ORDER BY k.available_at LIMIT "cap")
    UNION ALL
    -- a key paused while its batch runs is still in flight (the paused keys' own small index)
    (SELECT 1 FROM "corq"."keys" k WHERE k.subscription_id = "subscription" AND k.paused_at IS NOT NULL
       AND k.lease_until > clock_timestamp() LIMIT "cap")
  ) c;
  RETURN greatest(0, "cap" - leased);
END $$;
