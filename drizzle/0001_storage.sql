-- Custom migration: storage settings drizzle cannot express.
-- queue and keys churn (every ack deletes queue rows and rewrites a key row), so vacuum
-- them after 1% dead rows instead of the default 20%: the claim's index scans stay short.
ALTER TABLE "corq"."queue" SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0);
--> statement-breakpoint
ALTER TABLE "corq"."keys" SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0, fillfactor = 80);
