import { sql, type SQL } from "drizzle-orm";

// The directory of a deployment of cells (docs/architecture.md, "Cells"): which cell holds each
// slot, at which epoch, and the moves under way. Its own schema, in a database of its own or in
// one cell's (CellsOptions.directoryUrl): not part of the corq schema, which every cell has and
// whose migrations are per cell. Created with IF NOT EXISTS by cells.migrate().
export const DIRECTORY_SCHEMA: SQL[] = [
  sql`CREATE SCHEMA IF NOT EXISTS corq_directory`,
  sql`CREATE TABLE IF NOT EXISTS corq_directory.slots (
    slot integer PRIMARY KEY,
    cell text NOT NULL,
    epoch integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
  )`,
  // one move per slot at a time; the row stays until the move is done or rolled back, so a move
  // that stopped half-way is resumed (or rolled back) from its phase
  sql`CREATE TABLE IF NOT EXISTS corq_directory.moves (
    slot integer PRIMARY KEY,
    from_cell text NOT NULL,
    to_cell text NOT NULL,
    epoch integer NOT NULL,
    phase text NOT NULL,
    copied_tx xid8,
    copied_position bigint,
    copied integer NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    waiting text
  )`,
];

export interface SlotRow {
  slot: number;
  cell: string;
  epoch: number;
}

/** Every slot's cell and epoch. */
export const listSlots = () => sql`SELECT slot, cell, epoch FROM corq_directory.slots ORDER BY slot`;

export const countSlots = () => sql`SELECT count(*)::int AS slots FROM corq_directory.slots`;

/** The first assignment (one statement; a concurrent one that came first wins, the same as this or not). */
export function assignSlots(assignment: SlotRow[]): SQL {
  return sql`INSERT INTO corq_directory.slots (slot, cell, epoch)
    SELECT slot, cell, epoch FROM jsonb_to_recordset(${JSON.stringify(assignment)}::jsonb) AS t(slot int, cell text, epoch int)
    WHERE NOT EXISTS (SELECT FROM corq_directory.slots)
    ORDER BY slot
    ON CONFLICT (slot) DO NOTHING`;
}

/** A move of phase `phase` for which `waiting` says what it waits for, if anything. */
export interface MoveRow {
  slot: number;
  from_cell: string;
  to_cell: string;
  epoch: number;
  phase: "fencing" | "draining" | "copying" | "switching" | "cleaning";
  copied_tx: string | null;
  copied_position: number | null;
  copied: number;
  started_at: string;
  updated_at: string;
  waiting: string | null;
}

export const listMoves = () => sql`SELECT * FROM corq_directory.moves ORDER BY slot`;
export const readMove = (slot: number) => sql`SELECT * FROM corq_directory.moves WHERE slot = ${slot}`;

/**
 * Starts a move of `slot` from the cell the directory names at the epoch it names: nothing when
 * the slot already moves, or is not in `from` at `epoch` (a stale caller).
 */
export function beginMove(slot: number, from: string, to: string, epoch: number): SQL {
  return sql`INSERT INTO corq_directory.moves (slot, from_cell, to_cell, epoch, phase)
    SELECT ${slot}, ${from}, ${to}, ${epoch}, 'fencing'
    WHERE EXISTS (SELECT FROM corq_directory.slots WHERE slot = ${slot} AND cell = ${from} AND epoch = ${epoch})
    ON CONFLICT (slot) DO NOTHING
    RETURNING *`;
}

export function setPhase(
  slot: number,
  phase: MoveRow["phase"],
  progress: { tx?: string | null; position?: number | null; copied?: number; waiting?: string | null } = {},
): SQL {
  return sql`UPDATE corq_directory.moves SET phase = ${phase}, updated_at = now(),
      copied_tx = coalesce(${progress.tx ?? null}::xid8, copied_tx),
      copied_position = coalesce(${progress.position ?? null}::bigint, copied_position),
      copied = copied + ${progress.copied ?? 0},
      waiting = ${progress.waiting ?? null}
    WHERE slot = ${slot}`;
}

/** The switch: the slot is the target cell's from the next epoch on (the commit point of a move). */
export function switchSlot(slot: number, to: string, epoch: number): SQL {
  return sql`WITH moved AS (
      UPDATE corq_directory.slots SET cell = ${to}, epoch = ${epoch + 1}, updated_at = now()
      WHERE slot = ${slot} AND epoch = ${epoch}
      RETURNING slot
    )
    UPDATE corq_directory.moves SET phase = 'cleaning', updated_at = now(), waiting = NULL
    WHERE slot = ${slot} AND (EXISTS (SELECT FROM moved) OR EXISTS (
      SELECT FROM corq_directory.slots WHERE slot = ${slot} AND cell = ${to} AND epoch = ${epoch + 1}))
    RETURNING slot`;
}

export const endMove = (slot: number) => sql`DELETE FROM corq_directory.moves WHERE slot = ${slot}`;
