// Mutants of retention, erasure, idle-key compaction (gathered by mutants.ts).
import { one, type Mutant } from "./mutant.js";

// Not here, tried and left out: compaction without `k.dead_at IS NULL` (a dead key always has its
// failed event queued — pending > 0 keeps it — so that condition is defence in depth, not
// reachable); an erasure round's per-key count joined on the key alone (where two subscriptions
// share a key the UPDATE takes one of two rows, by the lock times: no test can tell which).
export const lifecycleMutants: Mutant[] = [
  // --- erasure ----------------------------------------------------------------------------
  {
    name: "lifecycle: erasure restarting a key keeps its expired lease token (its next event pays a failed attempt)",
    edits: one(
      "src/sql/log/eraseStream.ts",
      "lease_token = CASE WHEN r.fresh THEN NULL ELSE k.lease_token END,",
      "lease_token = k.lease_token,",
    ),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "lifecycle: erasure of a stream takes the streams its name is a prefix of",
    edits: one(
      "src/sql/log/eraseStream.ts",
      "WHERE e.stream = ${stream} AND e.version <= (SELECT erased_through FROM tomb)",
      "WHERE starts_with(e.stream, ${stream}) AND e.version <= (SELECT erased_through FROM tomb)",
    ),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "lifecycle: erasure locks a key row by its key alone (another subscription's key of that name: one queue keeps its rows)",
    edits: one(
      "src/sql/log/eraseStream.ts",
      "        WHERE subscription_id = h.subscription_id AND key = h.key\n",
      "        WHERE key = h.key\n",
    ),
    tests: ["test/erase.int.test.ts"],
  },
  {
    name: "lifecycle: erasure stops after its first round (a stream longer than a round keeps the rest)",
    edits: one("src/corq/log.ts", "if (round.erased < size && !created) return { erased };", "return { erased };"),
    tests: ["test/erase.int.test.ts"],
  },
  // --- retention --------------------------------------------------------------------------
  {
    name: "lifecycle: a rewind's retention refusal compares positions, not log order (an outbox event above the horizon)",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "(e.tx, e.position) < (r.removed_tx, r.removed_position)",
      "e.position < r.removed_position",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "lifecycle: retention's horizon set by the last chunk alone (a pass that removes nothing forgets it)",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "horizon = greatest(r.horizon, (SELECT max(position) + 1 FROM removed)),",
      "horizon = (SELECT max(position) + 1 FROM removed),",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "lifecycle: retention's last removed event set by the last chunk alone (a later pass forgets it)",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "\n                                    UNION ALL SELECT r.removed_tx, r.removed_position WHERE r.removed_tx IS NOT NULL",
      "",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "lifecycle: retention's last removed event the highest position, not the last in log order",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "ORDER BY tx DESC, position DESC LIMIT 1)\n      WHERE id = 1 AND EXISTS",
      "ORDER BY position DESC LIMIT 1)\n      WHERE id = 1 AND EXISTS",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "lifecycle: retention's lowest watermark leaves out paused subscriptions",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "watermark_position AS position FROM ${subscriptions}\n",
      "watermark_position AS position FROM ${subscriptions} WHERE NOT paused\n",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "lifecycle: retention takes a rewind's range from its first event on (off by one: that event may go)",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "SELECT rewind_from_tx, rewind_from_position - 1 FROM",
      "SELECT rewind_from_tx, rewind_from_position FROM",
    ),
    tests: ["test/rewindBeside.int.test.ts"],
  },
  {
    name: "lifecycle: retention's re-check of held events ignores the stream prefixes",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "e.position IS NOT NULL AND ${streamTaken(sql`e.stream`, sql`p.streams`)} AS taken,",
      "e.position IS NOT NULL AS taken,",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  {
    name: "lifecycle: retention removes a held event once no queue holds it, due or not",
    edits: one(
      "src/sql/lifecycle/retention.ts",
      "SELECT position, tx FROM rechecked WHERE taken AND due",
      "SELECT position, tx FROM rechecked WHERE taken",
    ),
    tests: ["test/retention.int.test.ts"],
  },
  // --- idle keys --------------------------------------------------------------------------
  {
    name: "lifecycle: compaction sets the seq floor to what it deletes (a later compaction lowers it: seqs reused)",
    edits: one(
      "src/sql/housekeeping/compactIdleKeys.ts",
      "SET key_seq_floor = greatest(s.key_seq_floor, d.seq)",
      "SET key_seq_floor = d.seq",
    ),
    tests: ["test/idleKeys.int.test.ts"],
  },
  {
    name: "lifecycle: compaction deletes every rate bucket of the subscription, not the key's (the limit starts over)",
    edits: one(
      "src/sql/housekeeping/compactIdleKeys.ts",
      "WHERE b.subscription_id = d.subscription_id AND b.scope = 'k:' || d.key",
      "WHERE b.subscription_id = d.subscription_id",
    ),
    tests: ["test/idleKeys.int.test.ts"],
  },
];
