// Mutants of cells: the append's fence, the copy as history, the seqs carried, the drain before
// the copy, the routed read's check (gathered by mutants.ts).
import { one, type Mutant } from "./mutant.js";

const cellsTests = ["test/cells/cells.int.test.ts"];

export const cellsMutants: Mutant[] = [
  {
    name: "cells: a routed append writes into a slot its cell is moving away (fence state ignored)",
    edits: one(
      "src/sql/log/appendEvents.ts",
      "WHERE epoch = ${fence.epoch} AND state = 'owned')",
      "WHERE epoch = ${fence.epoch})",
    ),
    tests: cellsTests,
  },
  {
    name: "cells: a routed append writes where its router's epoch is stale",
    edits: one(
      "src/sql/log/appendEvents.ts",
      "WHERE epoch = ${fence.epoch} AND state = 'owned')",
      "WHERE state = 'owned')",
    ),
    tests: cellsTests,
  },
  {
    name: "cells: copies are new events in the target cell (delivered again)",
    edits: one(
      "src/sql/cells/moveData.ts",
      "SELECT '1'::xid8, r->>'stream'",
      "SELECT pg_current_xact_id(), r->>'stream'",
    ),
    tests: cellsTests,
  },
  {
    name: "cells: a target cell's subscription that read nothing yet takes the copies",
    edits: one("src/sql/cells/moveData.ts", "WHERE watermark_tx < '2'::xid8`", "WHERE false`"),
    tests: cellsTests,
  },
  {
    name: "cells: seqs start again in the target cell",
    edits: one(
      "src/sql/cells/moveData.ts",
      "key_seq_floor = greatest(s.key_seq_floor, i.floor)",
      "key_seq_floor = s.key_seq_floor",
    ),
    tests: cellsTests,
  },
  {
    name: "cells: a move copies before the slot's queued events are delivered",
    edits: one("src/cells/move.ts", "if (backlog.length === 0) break;", "break;"),
    tests: cellsTests,
  },
  {
    name: "cells: a move copies events a subscription has not advanced yet (a mover without its code)",
    edits: one(
      "src/sql/cells/moveData.ts",
      "HAVING count(k.key) > 0 OR s.rewind_token IS NOT NULL OR EXISTS (",
      "HAVING count(k.key) > 0 OR s.rewind_token IS NOT NULL OR false AND EXISTS (",
    ),
    tests: cellsTests,
  },
  {
    name: "cells: a routed read trusts a stale directory",
    edits: one("src/cells/createCells.ts", "if (row?.holds) return result;", "return result;"),
    tests: cellsTests,
  },
  {
    name: "cells: a moved idempotency key answers without its events' positions",
    edits: one(
      "src/sql/cells/moveData.ts",
      "AND e.version > t.version - t.count AND e.version <= t.version), '[]'::jsonb)",
      "AND false), '[]'::jsonb)",
    ),
    tests: cellsTests,
  },
];
