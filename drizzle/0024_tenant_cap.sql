ALTER TABLE "corq"."subscriptions" ADD COLUMN "max_leased_keys_per_tenant" integer;--> statement-breakpoint
-- maxLeasedKeysPerTenant: how many more keys of tenant `t` a claim of subscription `sub_id` may
-- lease now, under `cap`. A claim of the tenant takes its turn by a transaction-scoped advisory
-- lock (held to the end of the claim's statement) and counts the tenant's live leases AFTER
-- the turn came (a VOLATILE function's query takes a fresh snapshot: see corq.lease_room,
-- 0018). The lock is only TRIED: a claim finds a tenant whose turn another claim holds as
-- having no room this time (it is being served) and goes on to the next tenant — claims
-- visit tenants in orders of their own, and waiting for each other's locks could deadlock.
-- Leases are counted up to `cap` by the tenant's range of keys_tenant_ready_idx (a leased
-- key's available_at is its lease's end), then among the paused keys.
CREATE FUNCTION "corq"."tenant_room"("sub_id" integer, "t" text, "cap" integer) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  leased integer;
BEGIN
  IF NOT pg_try_advisory_xact_lock(hashtext("sub_id" || ':' || "t"), 736420202) THEN
    RETURN 0;
  END IF;
  SELECT count(*) INTO leased FROM (
    (SELECT 1 FROM "corq"."keys" k WHERE k.subscription_id = "sub_id" AND k.tenant = "t"
       AND k.available_at > clock_timestamp() AND k.paused_at IS NULL AND k.lease_until > clock_timestamp()
     ORDER BY k.available_at LIMIT "cap")
    UNION ALL
    (SELECT 1 FROM "corq"."keys" k WHERE k.subscription_id = "sub_id" AND k.paused_at IS NOT NULL
       AND k.tenant = "t" AND k.lease_until > clock_timestamp() LIMIT "cap")
  ) c;
  RETURN greatest(0, "cap" - leased);
END $$;
