CREATE TABLE "corq"."idempotency_keys" (
	"stream" text NOT NULL,
	"key" text NOT NULL,
	"fingerprint" text NOT NULL,
	"version" integer NOT NULL,
	"positions" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY("stream","key")
);
--> statement-breakpoint
CREATE INDEX "idempotency_keys_created_at_idx" ON "corq"."idempotency_keys" USING btree ("created_at");--> statement-breakpoint
-- An idempotent append whose statement began before another append with the same key committed
-- (its snapshot cannot see that append's row, and the try-lock was already free) would write the
-- events twice; its row's insert then finds the other's row and writes nothing. The statement
-- calls this to fail as a whole — nothing written — with serialization_failure, and the append
-- runs again: its new snapshot sees the row and replays it.
CREATE FUNCTION "corq"."idempotency_race"() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION 'an append with this idempotency key committed meanwhile' USING ERRCODE = '40001';
END $$;
