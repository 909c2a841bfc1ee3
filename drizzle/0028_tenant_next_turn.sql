-- The next turn of a tenant the fair pick reached and took no key of (src/sql/consume/
-- fairPick.ts): called by the claim's `served` step under the tenant row's lock. Its keys are
-- read here with a fresh snapshot (a VOLATILE function's query), so a writer that gave one of
-- them work and committed after the claim's statement began is seen; one that commits later
-- takes the row's lock first (tenantTurns.ts) and waits for this claim, then makes the turn
-- earlier again. The first entry of the tenant's keys_tenant_ready_idx range is its keys'
-- earliest time: within a lease of now (a leased key's time is its lease's end, and an ack may
-- end the lease any moment) or past → now, the back of the line; later → then; none → null
-- (no work: not visited until a key of it gets some).
CREATE FUNCTION "corq"."tenant_next_turn"("sub_id" integer, "t" text, "lease_ms" integer) RETURNS timestamptz LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  next timestamptz;
BEGIN
  SELECT k.available_at INTO next FROM "corq"."keys" k
  WHERE k.subscription_id = "sub_id" AND k.tenant = "t" AND k.available_at IS NOT NULL AND k.paused_at IS NULL
  ORDER BY k.available_at LIMIT 1;
  RETURN CASE WHEN next IS NULL THEN NULL
    WHEN next <= clock_timestamp() + "lease_ms" * interval '1 millisecond' THEN clock_timestamp()
    ELSE next END;
END $$;
--> statement-breakpoint
-- Tenants made before turns existed: all due, visited once each and then turned as above.
UPDATE "corq"."tenants" SET "due_at" = '-infinity';
