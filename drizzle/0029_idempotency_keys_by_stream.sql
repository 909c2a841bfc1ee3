ALTER TABLE "corq"."idempotency_keys" DROP CONSTRAINT "idempotency_keys_pkey";
--> statement-breakpoint
ALTER TABLE "corq"."idempotency_keys" ADD CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY("stream","scope","key");