CREATE TABLE "corq"."tenants" (
	"subscription_id" integer NOT NULL,
	"tenant" text NOT NULL,
	"served_at" timestamp with time zone,
	CONSTRAINT "tenants_pkey" PRIMARY KEY("subscription_id","tenant")
);
--> statement-breakpoint
ALTER TABLE "corq"."keys" ADD COLUMN "tenant" text;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "tenant" text;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "tenant_weights" jsonb;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "tenant_mismatched" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "keys_tenant_ready_idx" ON "corq"."keys" USING btree ("subscription_id","tenant","available_at","key") WHERE available_at IS NOT NULL AND paused_at IS NULL AND tenant IS NOT NULL;