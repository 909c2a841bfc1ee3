-- Plans that hold without session settings (DESIGN invariants 12 and 13): corq's pool no longer
-- runs SET enable_seqscan = off / max_parallel_workers_per_gather = 0 on its connections (through a
-- transaction-mode pooler a session SET leaks to other clients or is lost; over Neon's HTTP path
-- nothing can be set).
-- corq.rate_take returns one row per call; as a set-returning PL/pgSQL function without ROWS the
-- planner assumed 1,000, multiplied through the claim's rate-limit joins (an estimated cost of
-- 1.8e9 at 1M keys: JIT-compiled for seconds on PostgreSQL 15 with JIT on).
ALTER FUNCTION "corq"."rate_take"(integer, text, integer, integer, integer) ROWS 1;--> statement-breakpoint
-- No parallel scans of corq's tables: its statements read a few rows by index, and a parallel plan
-- only ever came from an estimate gone wrong (statistics of a smaller table), where starting the
-- workers was most of the time (a page of dead keys 12–20 ms that way, 1–2 ms without, at 1M keys
-- right after a bulk load). A table's own setting, so the user's tables keep theirs.
ALTER TABLE "corq"."events" SET (parallel_workers = 0);--> statement-breakpoint
ALTER TABLE "corq"."streams" SET (parallel_workers = 0);--> statement-breakpoint
ALTER TABLE "corq"."rewind_staged" SET (parallel_workers = 0);--> statement-breakpoint
ALTER TABLE "corq"."keys" SET (parallel_workers = 0);--> statement-breakpoint
ALTER TABLE "corq"."queue" SET (parallel_workers = 0);--> statement-breakpoint
ALTER TABLE "corq"."activity" SET (parallel_workers = 0);--> statement-breakpoint
ALTER TABLE "corq"."idempotency_keys" SET (parallel_workers = 0);--> statement-breakpoint
ALTER TABLE "corq"."tenants" SET (parallel_workers = 0);
