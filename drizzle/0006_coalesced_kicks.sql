CREATE TABLE "corq"."advance_kicks" (
	"subscription_id" integer PRIMARY KEY NOT NULL,
	"kicked" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "corq"."consumer_slots" (
	"slot" integer PRIMARY KEY NOT NULL,
	"busy_until" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "handled_kicks" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
-- Edited by hand: the slots exist up front (CORQ_CONCURRENCY is at most 1000).
INSERT INTO "corq"."consumer_slots" (slot) SELECT generate_series(1, 1000);
