// Mutants of retention, erasure, idle-key compaction (gathered by mutants.ts).
import { one, type Mutant } from "./mutant.js";

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
];
