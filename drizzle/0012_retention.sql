-- Edited by hand after drizzle-kit generate: the policy's one row, and the trigger that records
-- where a subscription created `from: "beginning"` began (what drizzle cannot express).
CREATE TABLE "corq"."retention" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"max_age_ms" bigint,
	"streams" text[],
	"option" jsonb,
	"swept_to" bigint DEFAULT 0 NOT NULL,
	"held_after" bigint DEFAULT 0 NOT NULL,
	"horizon" bigint,
	"removed_tx" "xid8",
	"removed_position" bigint,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "retention_one_row" CHECK (id = 1)
);
--> statement-breakpoint
CREATE TABLE "corq"."retention_held" (
	"position" bigint PRIMARY KEY NOT NULL
);
--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "start_horizon" bigint;
--> statement-breakpoint
INSERT INTO "corq"."retention" ("id") VALUES (1);
--> statement-breakpoint
-- A subscription created from the beginning records the retention horizon: it starts there (the
-- events of retained streams below it are gone). FOR SHARE: a retention chunk under way holds the
-- row FOR UPDATE, so this waits for its commit and reads the horizon it left; a chunk that starts
-- meanwhile waits for this insert to commit and then sees the new subscription's watermark.
-- (BEFORE INSERT triggers also fire for an INSERT … ON CONFLICT that turns into an update: the
-- value is then simply not used.)
CREATE FUNCTION "corq"."record_start_horizon"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW."from" = 'beginning' THEN
    SELECT horizon INTO NEW.start_horizon FROM corq.retention WHERE id = 1 FOR SHARE;
  END IF;
  RETURN NEW;
END $$;
--> statement-breakpoint
CREATE TRIGGER "subscriptions_start_horizon" BEFORE INSERT ON "corq"."subscriptions"
  FOR EACH ROW EXECUTE FUNCTION "corq"."record_start_horizon"();