// Saga-shaped events (~280 bytes each: 4 steps per saga stream, an order id, a note) written
// straight into corq's tables as the append writes them, 200,000 per statement: millions of
// events in minutes, for the benches that need a large log (bench/retention.ts,
// bench/retentionPass.ts). Saga i / 4 is stream `saga-<i / 4>`, version i % 4.
import { performance } from "node:perf_hooks";
import type pg from "pg";

/** Writes events `from` … `from + n − 1`; `old`: two days old (a day's retention takes them). Returns ms. */
export async function loadSagaEvents(pool: pg.Pool, n: number, from: number, old: boolean): Promise<number> {
  const started = performance.now();
  for (let done = 0; done < n; done += 200_000) {
    const size = Math.min(200_000, n - done);
    await pool.query(
      `WITH ins AS (
        INSERT INTO corq.events (stream, version, name, data, meta, created_at)
        SELECT 'saga-' || (i / 4), i % 4, 'Step' || (i % 4),
          jsonb_build_object('orderId', 'order-' || (i / 4), 'amount', i % 997, 'sku', 'sku-' || (i % 113), 'note', repeat('x', 120)),
          jsonb_build_object('by', 'bench'), ${old ? "now() - interval '2 days'" : "now()"}
        FROM generate_series($1::bigint, $2::bigint) i RETURNING stream, version, tx)
      INSERT INTO corq.streams (stream, version, last_tx) SELECT stream, max(version), max(tx) FROM ins GROUP BY stream
      ON CONFLICT (stream) DO UPDATE SET version = excluded.version, last_tx = excluded.last_tx`,
      [from + done, from + done + size - 1],
    );
  }
  return performance.now() - started;
}
