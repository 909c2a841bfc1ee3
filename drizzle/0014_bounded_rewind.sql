CREATE TABLE "corq"."rewind_staged" (
	"subscription_id" integer NOT NULL,
	"key" text NOT NULL,
	"tx" "xid8" NOT NULL,
	"position" bigint NOT NULL,
	CONSTRAINT "rewind_staged_pkey" PRIMARY KEY("subscription_id","key","tx","position")
);
--> statement-breakpoint
ALTER TABLE "corq"."keys" ADD COLUMN "rewound_by" integer;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "rewinds" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "rewind_token" uuid;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "rewind_until" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "rewind_from_tx" "xid8";--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "rewind_from_position" bigint;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "rewind_cursor_tx" "xid8";--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "rewind_cursor_position" bigint;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "rewind_key" text;