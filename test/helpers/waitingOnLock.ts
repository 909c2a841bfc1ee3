import type pg from "pg";
import { until } from "./until.js";

/**
 * Resolves once a statement of this database whose text contains `fragment` waits for a lock
 * (pg_stat_activity): how tests hold a race — a lock held by hand, the other side seen waiting
 * on it — instead of timing it. The fragment must be within the statement's first 1,024
 * characters (track_activity_query_size).
 */
export function waitingOnLock(raw: pg.Pool, fragment: string): Promise<void> {
  return until(
    async () =>
      (
        await raw.query(
          "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE $1",
          [`%${fragment}%`],
        )
      ).rows.length > 0,
    { message: `no statement with "${fragment}" waited for a lock` },
  );
}
