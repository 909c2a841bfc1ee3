DROP INDEX "corq"."keys_ready_idx";--> statement-breakpoint
ALTER TABLE "corq"."keys" ADD COLUMN "seq" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."keys" ADD COLUMN "last_seq" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."keys" ADD COLUMN "replay_seq" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."keys" ADD COLUMN "paused_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "corq"."keys" ADD COLUMN "lease_holder" text;--> statement-breakpoint
ALTER TABLE "corq"."keys" ADD COLUMN "leased_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "corq"."queue" ADD COLUMN "replay" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "corq"."subscriptions" ADD COLUMN "incarnation" uuid DEFAULT gen_random_uuid() NOT NULL;--> statement-breakpoint
-- Edited by hand from here: queue.seq is added without NOT NULL, filled, then made NOT NULL
-- (drizzle adds a NOT NULL column without a default, which a populated queue refuses).
-- Events already queued get their seqs in log order, numbered after the events their key has
-- finished (acked or skipped), so a key's seqs count its events from 1; the ack cursor
-- (last_seq) starts right below them and the counter (seq) at the last one.
ALTER TABLE "corq"."queue" ADD COLUMN "seq" bigint;
--> statement-breakpoint
UPDATE "corq"."queue" q SET "seq" = n.seq
FROM (
  SELECT q.subscription_id, q.key, q.tx, q.position,
    coalesce(k.acked + k.skipped, 0) + row_number() OVER (PARTITION BY q.subscription_id, q.key ORDER BY q.tx, q.position) AS seq
  FROM "corq"."queue" q LEFT JOIN "corq"."keys" k ON k.subscription_id = q.subscription_id AND k.key = q.key
) n
WHERE q.subscription_id = n.subscription_id AND q.key = n.key AND q.tx = n.tx AND q.position = n.position;
--> statement-breakpoint
UPDATE "corq"."keys" k SET "last_seq" = k.acked + k.skipped,
  "seq" = k.acked + k.skipped + (SELECT count(*) FROM "corq"."queue" q WHERE q.subscription_id = k.subscription_id AND q.key = k.key);
--> statement-breakpoint
ALTER TABLE "corq"."queue" ALTER COLUMN "seq" SET NOT NULL;
--> statement-breakpoint
ALTER TABLE "corq"."queue" DROP CONSTRAINT "queue_pkey";
--> statement-breakpoint
ALTER TABLE "corq"."queue" ADD CONSTRAINT "queue_pkey" PRIMARY KEY("subscription_id","key","seq");
--> statement-breakpoint
CREATE INDEX "keys_paused_at_idx" ON "corq"."keys" USING btree ("subscription_id","paused_at") WHERE paused_at IS NOT NULL;
--> statement-breakpoint
CREATE INDEX "keys_ready_idx" ON "corq"."keys" USING btree ("subscription_id",("last_seq" < "replay_seq"),"available_at","key") WHERE available_at IS NOT NULL AND paused_at IS NULL;
