ALTER TABLE "corq"."idempotency_keys" ADD COLUMN "scope" text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "max_delay_ms" bigint DEFAULT 86400000 NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."idempotency_keys" DROP CONSTRAINT "idempotency_keys_pkey";
--> statement-breakpoint
ALTER TABLE "corq"."idempotency_keys" ADD CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY("scope","stream","key");