CREATE TABLE "corq"."alert_sends" (
	"alert_id" integer NOT NULL,
	"type" text NOT NULL,
	"subject" text NOT NULL,
	"incident" text,
	"message_id" text NOT NULL,
	"payload" jsonb NOT NULL,
	"queued_at" timestamp with time zone DEFAULT now() NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_at" timestamp with time zone,
	"sending_until" timestamp with time zone,
	"sent_at" timestamp with time zone,
	"last_error" text,
	CONSTRAINT "alert_sends_pkey" PRIMARY KEY("alert_id","type","subject")
);
--> statement-breakpoint
CREATE TABLE "corq"."alerts" (
	"id" integer PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "corq"."alerts_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 2147483647 START WITH 1 CACHE 1),
	"name" text NOT NULL,
	"url" text NOT NULL,
	"secret" text NOT NULL,
	"conditions" text[] NOT NULL,
	"lag_over" bigint,
	"held_over_ms" bigint,
	"min_interval_ms" bigint NOT NULL,
	"checked_at" timestamp with time zone DEFAULT now() NOT NULL,
	"sent" bigint DEFAULT 0 NOT NULL,
	"failed" bigint DEFAULT 0 NOT NULL,
	"last_send" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "alerts_name_key" UNIQUE("name"),
	CONSTRAINT "alerts_conditions_check" CHECK (cardinality(conditions) > 0 AND conditions <@ ARRAY['key.dead', 'subscription.lag', 'advance.failed', 'horizon.held']::text[])
);
--> statement-breakpoint
ALTER TABLE "corq"."alert_sends" ADD CONSTRAINT "alert_sends_alert_id_alerts_id_fk" FOREIGN KEY ("alert_id") REFERENCES "corq"."alerts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "alert_sends_next_at_idx" ON "corq"."alert_sends" USING btree ("next_at") WHERE next_at IS NOT NULL;