// A database as an earlier release of corq left it, for the upgrade tests: its migrations applied
// the way that release's `corq migrate` did, then the rows it had written.
import type pg from "pg";
import { migrations } from "../../src/db/migrations.js";

/** The index of the first migration whose tag ends with `suffix` (the schema change under test). */
export function migrationIndex(suffix: string): number {
  const index = migrations.findIndex((m) => m.tag.endsWith(suffix));
  if (index <= 0) throw new Error(`no migration after the first ends with "${suffix}"`);
  return index;
}

/** Applies the first `count` migrations and records them, as the release that had just those did. */
export async function applyMigrations(client: pg.ClientBase, count: number): Promise<void> {
  for (const migration of migrations.slice(0, count)) {
    for (const statement of migration.statements) await client.query(statement);
    await client.query("INSERT INTO corq.migrations (tag) VALUES ($1)", [migration.tag]);
  }
}

/**
 * Appends as the release before did, each its own transaction: [stream, version] in log order,
 * created `createdAt` (SQL; default now()).
 */
export async function insertEvents(
  client: pg.ClientBase,
  events: readonly (readonly [string, number])[],
  createdAt = "now()",
): Promise<void> {
  for (const [stream, version] of events)
    await client.query(
      `INSERT INTO corq.events (stream, version, name, data, created_at) VALUES ($1, $2, 'E', '{}', ${createdAt})`,
      [stream, version],
    );
}

/** Ten events of five streams, interleaved: the log the upgrade tests of keys in every state start from. */
export const INTERLEAVED_LOG = [
  ["a", 0],
  ["b", 0],
  ["e", 0],
  ["c", 0],
  ["a", 1],
  ["d", 0],
  ["b", 1],
  ["e", 1],
  ["d", 1],
  ["a", 2],
] as const;

/** The tags a `migrate()` from that schema applies: every migration from `count` on. */
export const tagsFrom = (count: number) => migrations.slice(count).map((m) => m.tag);

/**
 * What an earlier release left after its appends and advances: each stream's version row, a code
 * subscription `s` and a push subscription `p` both advanced through the whole log (key = stream),
 * every event queued in `s` (the events of stream `e` replaying: acked, then rewound, queued again
 * as seqs version + 3), and the key rows of `s` as given (`keyRows`: the VALUES of corq.keys in the
 * column order below — their pending and seq must match the events queued).
 */
export async function seedAdvancedSubscriptions(client: pg.ClientBase, keyRows: string): Promise<void> {
  await client.query(`
    INSERT INTO corq.streams (stream, version, last_tx) SELECT stream, max(version), max(tx) FROM corq.events GROUP BY stream;
    INSERT INTO corq.subscriptions (name, kind, events, key, "from", batch_size, max_attempts, backoff_initial_ms,
        backoff_max_ms, backoff_factor, lease_ms, deliver, watermark_tx, watermark_position)
      SELECT name, kind, '{*}', 'stream', 'beginning', 100, 5, 0, 0, 1, 30000, deliver, tx, position
      FROM (SELECT tx, position FROM corq.events ORDER BY tx DESC, position DESC LIMIT 1) last,
        (VALUES ('s', 'code', NULL::jsonb),
                ('p', 'push', '{"url": "https://receiver.example/hook", "timeoutMs": 1000, "secret": "old"}'::jsonb)) v(name, kind, deliver)
      ORDER BY name DESC;
    INSERT INTO corq.queue (subscription_id, key, seq, tx, position, replay)
      SELECT 1, stream, CASE WHEN stream = 'e' THEN version + 3 ELSE version + 1 END, tx, position, stream = 'e'
      FROM corq.events;
    INSERT INTO corq.keys (subscription_id, key, pending, attempts, available_at, lease_token, lease_until, lease_holder,
        leased_at, dead_at, failed_position, paused_at, acked, seq, last_seq, replay_seq)
      VALUES ${keyRows};`);
}
