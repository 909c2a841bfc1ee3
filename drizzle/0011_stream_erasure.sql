ALTER TABLE "corq"."keys" ADD COLUMN "erased" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."streams" ADD COLUMN "erased_through" integer;--> statement-breakpoint
ALTER TABLE "corq"."streams" ADD COLUMN "erased_events" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."streams" ADD COLUMN "erased_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "corq"."streams" ADD COLUMN "erase_sweep" bigint[];--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "erase_epoch" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "queue_position_idx" ON "corq"."queue" USING btree ("position");