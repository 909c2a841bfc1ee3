DROP INDEX "corq"."keys_available_at_idx";--> statement-breakpoint
ALTER TABLE "corq"."streams" ADD COLUMN "last_tx" "xid8";--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "skipped_invalid" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "last_skip" jsonb;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "skipped_dead" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "advance_error" text;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "advance_error_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "keys_ready_idx" ON "corq"."keys" USING btree ("subscription_id","available_at","key") WHERE available_at IS NOT NULL;--> statement-breakpoint
-- Edited by hand from here: existing streams learn the transaction of their last event,
-- existing subscriptions count the dead letters already skipped.
UPDATE "corq"."streams" s SET "last_tx" = e.tx FROM "corq"."events" e WHERE e.stream = s.stream AND e.version = s.version;
--> statement-breakpoint
UPDATE "corq"."subscriptions" s SET "skipped_dead" = (SELECT coalesce(sum(k.skipped), 0) FROM "corq"."keys" k WHERE k.subscription_id = s.id);
