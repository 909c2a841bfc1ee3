-- Edited by hand: IF NOT EXISTS, so a schema a DBA created first (to set grants) is used.
CREATE SCHEMA IF NOT EXISTS "corq";
--> statement-breakpoint
CREATE TABLE "corq"."events" (
	"position" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "corq"."events_position_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"stream" text NOT NULL,
	"version" integer NOT NULL,
	"name" text NOT NULL,
	"data" jsonb NOT NULL,
	"meta" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"tx" "xid8" DEFAULT pg_current_xact_id() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "corq"."keys" (
	"subscription_id" integer NOT NULL,
	"key" text NOT NULL,
	"pending" integer DEFAULT 0 NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"available_at" timestamp with time zone,
	"lease_token" uuid,
	"lease_until" timestamp with time zone,
	"dead_at" timestamp with time zone,
	"failed_position" bigint,
	"last_error" text,
	"last_position" bigint,
	"acked" bigint DEFAULT 0 NOT NULL,
	"skipped" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "keys_pkey" PRIMARY KEY("subscription_id","key")
);
--> statement-breakpoint
CREATE TABLE "corq"."migrations" (
	"tag" text PRIMARY KEY NOT NULL,
	"applied_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "corq"."queue" (
	"subscription_id" integer NOT NULL,
	"key" text NOT NULL,
	"tx" "xid8" NOT NULL,
	"position" bigint NOT NULL,
	CONSTRAINT "queue_pkey" PRIMARY KEY("subscription_id","key","tx","position")
);
--> statement-breakpoint
CREATE TABLE "corq"."streams" (
	"stream" text PRIMARY KEY NOT NULL,
	"version" integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE "corq"."subscriptions" (
	"id" integer PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "corq"."subscriptions_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 2147483647 START WITH 1 CACHE 1),
	"name" text NOT NULL,
	"kind" text NOT NULL,
	"events" text[] NOT NULL,
	"key" text NOT NULL,
	"from" text NOT NULL,
	"batch_size" integer NOT NULL,
	"max_attempts" integer NOT NULL,
	"backoff_initial_ms" integer NOT NULL,
	"backoff_max_ms" integer NOT NULL,
	"backoff_factor" double precision NOT NULL,
	"lease_ms" integer NOT NULL,
	"deliver" jsonb,
	"paused" boolean DEFAULT false NOT NULL,
	"watermark_tx" "xid8" NOT NULL,
	"watermark_position" bigint NOT NULL,
	"skipped" bigint DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "subscriptions_name_key" UNIQUE("name")
);
--> statement-breakpoint
CREATE UNIQUE INDEX "events_stream_version_key" ON "corq"."events" USING btree ("stream","version");--> statement-breakpoint
CREATE INDEX "events_tx_position_idx" ON "corq"."events" USING btree ("tx","position");--> statement-breakpoint
CREATE INDEX "keys_available_at_idx" ON "corq"."keys" USING btree ("subscription_id","available_at") WHERE available_at IS NOT NULL;--> statement-breakpoint
CREATE INDEX "keys_dead_at_idx" ON "corq"."keys" USING btree ("subscription_id","dead_at") WHERE dead_at IS NOT NULL;