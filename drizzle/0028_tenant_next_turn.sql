-- The next turn of a tenant the fair pick reached and took no key of (src/sql/consume/
-- fairPick.ts): called by the claim's `served` step under the tenant row's lock. Its keys are
-- read here with a fresh snapshot (a VOLATILE function's query), so a writer that gave one of
-- them work and committed after the claim's statement began is seen; one that commits later
-- takes the row's lock first (tenantTurns.ts) and waits for this claim, then makes the turn
-- earlier again. The first entry of the tenant's keys_tenant_ready_idx range is its keys'
-- earliest time: none → null (no work: not visited until a key of it gets some); later than a
-- lease from now → then; else, with a cap per tenant (`cap`) that its live leases fill → the
-- first of those leases' ends (a settle gives it room and makes its turn now: tenantTurns.ts
-- roomFreed; so tenants at their cap do not fill every claim's walk); else → now, the back of
-- the line (a leased key's time is its lease's end, and an ack may end the lease any moment).
CREATE FUNCTION "corq"."tenant_next_turn"("sub_id" integer, "t" text, "lease_ms" integer, "cap" integer) RETURNS timestamptz LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  earliest timestamptz;
  leased integer;
  lease_end timestamptz;
BEGIN
  SELECT k.available_at INTO earliest FROM "corq"."keys" k
  WHERE k.subscription_id = "sub_id" AND k.tenant = "t" AND k.available_at IS NOT NULL AND k.paused_at IS NULL
  ORDER BY k.available_at LIMIT 1;
  IF earliest IS NULL THEN
    RETURN NULL;
  END IF;
  IF earliest > clock_timestamp() + "lease_ms" * interval '1 millisecond' THEN
    RETURN earliest;
  END IF;
  IF "cap" IS NOT NULL THEN
    SELECT count(*), min(l.available_at) INTO leased, lease_end FROM (
      SELECT k.available_at FROM "corq"."keys" k
      WHERE k.subscription_id = "sub_id" AND k.tenant = "t" AND k.available_at > clock_timestamp()
        AND k.paused_at IS NULL AND k.lease_until > clock_timestamp()
      ORDER BY k.available_at LIMIT "cap") l;
    IF leased >= "cap" THEN
      RETURN lease_end;
    END IF;
  END IF;
  RETURN clock_timestamp();
END $$;
--> statement-breakpoint
-- Tenants made before turns existed: all due, visited once each and then turned as above; and a
-- row for every tenant whose keys have work but that has none (retries, resumes and erasures
-- made no row before turns, and idle rows were pruned while their keys were dead or paused).
UPDATE "corq"."tenants" SET "due_at" = '-infinity';
--> statement-breakpoint
INSERT INTO "corq"."tenants" ("subscription_id", "tenant", "due_at")
SELECT DISTINCT k.subscription_id, k.tenant, '-infinity'::timestamptz FROM "corq"."keys" k
WHERE k.tenant IS NOT NULL AND k.available_at IS NOT NULL
ON CONFLICT ("subscription_id", "tenant") DO NOTHING;
