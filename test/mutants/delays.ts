// Mutants of delays: maxDelayMs, the order of delayed events, the next due time (gathered by mutants.ts).
import { one, type Mutant } from "./mutant.js";

export const delaysMutants: Mutant[] = [
  // --- the order of a key's delayed events ------------------------------------------------
  {
    // [e1, e2 +10 min, e3 +1 min]: the batch stopped before e3 (due first), so e2 went at once
    name: "delays: a batch stops at the event due soonest, not the first not yet due (a later delay goes early)",
    edits: one(
      "src/sql/common/delays.ts",
      "AND d.deliver_at > ${at} AND d.seq > ${after} ORDER BY d.seq LIMIT 1)",
      "AND d.deliver_at > ${at} AND d.seq > ${after} ORDER BY d.deliver_at LIMIT 1)",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  {
    // after an ack the key waits for its next delayed event, not its head: an undelayed head
    // waits out a later event's whole delay whenever a batch stops early
    name: "delays: after an ack a key waits for its next delayed event though its head is not delayed",
    edits: one(
      "src/sql/common/delays.ts",
      "AND h.seq > ${after} ORDER BY h.seq LIMIT 1)",
      "AND h.seq > ${after} AND h.deliver_at > ${at} ORDER BY h.seq LIMIT 1)",
    ),
    tests: ["test/delays.int.test.ts"],
  },
  // --- the next due time ------------------------------------------------------------------
  {
    name: "delays: the next due time as an int (overflows past 24.8 days: serve's runner logs an error every idle pass)",
    edits: one("src/sql/consume/nextDue.ts", "* 1000)::float8 AS due_in_ms", "* 1000)::int AS due_in_ms"),
    tests: ["test/runner.int.test.ts"],
  },
];
