-- Edited by hand: activity and throughput are UNLOGGED (drizzle cannot express it):
-- dashboard telemetry, no WAL, emptied by a crash.
CREATE UNLOGGED TABLE "corq"."activity" (
	"subscription_id" integer NOT NULL,
	"key" text NOT NULL,
	"started_at" timestamp with time zone NOT NULL,
	"finished_at" timestamp with time zone DEFAULT now() NOT NULL,
	"events" integer NOT NULL,
	"outcome" text NOT NULL
);
--> statement-breakpoint
CREATE UNLOGGED TABLE "corq"."throughput" (
	"subscription_id" integer NOT NULL,
	"bucket" timestamp with time zone NOT NULL,
	"events" bigint NOT NULL,
	CONSTRAINT "throughput_pkey" PRIMARY KEY("subscription_id","bucket")
);
--> statement-breakpoint
CREATE TABLE "corq"."webhook_ids" (
	"id" text PRIMARY KEY NOT NULL,
	"seen_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "activity_finished_at_idx" ON "corq"."activity" USING btree ("finished_at");