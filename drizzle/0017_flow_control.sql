ALTER TABLE "corq"."events" ADD COLUMN "deliver_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "corq"."keys" ADD COLUMN "postponed" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."keys" ADD COLUMN "postponed_since" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "corq"."queue" ADD COLUMN "deliver_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "queue_delayed_idx" ON "corq"."queue" USING btree ("subscription_id","key","seq") WHERE deliver_at IS NOT NULL;