-- Idle keys compacted, seqs never reused. now() is stable, so the column is added without a
-- table rewrite: every key row of the release before counts as active at the upgrade, and none
-- is compacted before CORQ_KEY_IDLE_MS has passed after it.
ALTER TABLE "corq"."keys" ADD COLUMN "active_at" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "key_seq_floor" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "keys_idle_idx" ON "corq"."keys" USING btree ("subscription_id","active_at") WHERE available_at IS NULL AND dead_at IS NULL AND paused_at IS NULL;
