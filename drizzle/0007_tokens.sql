CREATE TABLE "corq"."tokens" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"scopes" text[] NOT NULL,
	"stream_prefix" text,
	"hash" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_used_at" timestamp with time zone,
	CONSTRAINT "tokens_scopes_check" CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['append', 'read', 'operate', 'admin']::text[])
);
--> statement-breakpoint
ALTER TABLE "corq"."dashboard_sessions" ADD COLUMN "token_id" uuid;--> statement-breakpoint
CREATE UNIQUE INDEX "tokens_hash_key" ON "corq"."tokens" USING btree ("hash");--> statement-breakpoint
ALTER TABLE "corq"."dashboard_sessions" ADD CONSTRAINT "dashboard_sessions_token_id_tokens_id_fk" FOREIGN KEY ("token_id") REFERENCES "corq"."tokens"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "dashboard_sessions_token_id_idx" ON "corq"."dashboard_sessions" USING btree ("token_id");