// A deployment of several corq databases ("cells", docs/architecture.md "Cells"): what
// createCells takes and the object it returns.
import type { AnyEvents, EventMap, StoredEvent } from "./events.js";
import type { Corq } from "./corq.js";
import type { CorqOptions } from "./corqOptions.js";
import type { DeadLetter, KeyState, SubscriptionStats } from "./inspection.js";
import type { DoctorReport } from "./doctor.js";

export interface CellsOptions<E extends EventMap = AnyEvents> extends Omit<CorqOptions<E>, "databaseUrl" | "db"> {
  /**
   * The cells by name (letters, digits, `-`, `_`; at most 40), each a Postgres connection string;
   * the first is the home cell: every slot starts there unless every cell is empty when the
   * directory is made (then the slots are spread evenly).
   */
  cells: Record<string, string>;
  /** Where the directory lives (schema corq_directory). Default: the home cell's database. */
  directoryUrl?: string;
  /** A stream's tenant (default: the text before its first ":"; "" without one). Keep it fixed. */
  tenant?: (stream: string) => string;
  /** Slots of a directory made by this deployment's first migrate() (default 1,024). */
  slots?: number;
  /** How long an append waits for a move of its slot before `slot_moving` (default 10 s). */
  moveWaitMs?: number;
}

/** Where a stream lives: its tenant, the tenant's slot, and the slot's cell at the epoch the directory gave. */
export interface StreamPlace {
  stream: string;
  tenant: string;
  slot: number;
  cell: string;
  epoch: number;
}

/** A move in the directory, as `corq cells` lists it. */
export interface SlotMove {
  slot: number;
  from: string;
  to: string;
  epoch: number;
  phase: "fencing" | "draining" | "copying" | "switching" | "cleaning";
  /** Events copied so far. */
  copied: number;
  startedAt: string;
  updatedAt: string;
  /** What the move waits for in its old cell (draining): queued events, dead or paused keys, a rewind. */
  waiting: string | null;
}

/** What a call to move() did: `done` once the slot is the target cell's and the old one is clean. */
export interface MoveReport {
  slot: number;
  from: string;
  to: string;
  done: boolean;
  /** Where it stopped (not done): call move() again to resume, or rollbackMove() before the switch. */
  phase: SlotMove["phase"] | "done";
  copied: number;
  waiting: string | null;
}

export interface CellEvent extends StoredEvent {
  /** The cell whose log the event is in: positions are per cell. */
  cell: string;
}

/** corq over several databases: the Corq operations across cells, and the directory's. */
export interface Cells<E extends EventMap = AnyEvents>
  extends Pick<
    Corq<E>,
    | "append"
    | "readStream"
    | "eraseStream"
    | "consume"
    | "putSubscription"
    | "deleteSubscription"
    | "pause"
    | "resume"
    | "releaseDeadLetters"
    | "close"
  > {
  /** The cells' names, home first. */
  readonly names: string[];
  /** One cell's own Corq (its log, queues and operations alone; an outbox transaction on its database). */
  cell(name: string): Corq<E>;
  /** Migrates every cell, then makes the directory if there is none (each cell holding its slots). */
  migrate(): Promise<{ applied: Record<string, string[]> }>;
  /** Where a stream's events go (routed by its tenant's slot). */
  place(stream: string): Promise<StreamPlace>;
  /** Every cell advances on its own; the totals by subscription. A cell that fails does not stop the others (its error is thrown after). */
  advance(options?: Parameters<Corq["advance"]>[0]): Promise<Record<string, number>>;
  drain(subscription: string, options?: Parameters<Corq["drain"]>[1]): Promise<Awaited<ReturnType<Corq["drain"]>>>;
  /**
   * The log of every cell, each in its own safe order, after a cursor per cell (a vector; a
   * cell missing from it is read from its beginning): never one global order.
   */
  readLog(options?: { after?: Record<string, number>; limit?: number }): Promise<{
    events: CellEvent[];
    next: Record<string, number | null>;
  }>;
  /** Per cell, and summed (subscriptions by name, the log's events). */
  stats(): Promise<{
    cells: Record<string, Awaited<ReturnType<Corq["stats"]>>>;
    /** Summed over the cells; `keys`: each status's count (ready, leased, dead…). */
    subscriptions: (Pick<SubscriptionStats, "name" | "lag" | "pending"> & { keys: Record<string, number> })[];
    log: { events: number; eventsEstimated: boolean };
  }>;
  keys(subscription: string, options?: Parameters<Corq["keys"]>[1]): Promise<(KeyState & { cell: string })[]>;
  /** The key in every cell that has a row for it. */
  key(subscription: string, key: string): Promise<(KeyState & { cell: string })[]>;
  pauseKey(subscription: string, key: string): Promise<void>;
  resumeKey(subscription: string, key: string): Promise<void>;
  /** From the beginning in every cell; a position belongs to one cell: `{ to, cell }`. */
  rewind(
    subscription: string,
    options: { to: number | "beginning"; key?: string; cell?: string },
  ): Promise<{ requeued: number }>;
  deadLetters(options?: Parameters<Corq["deadLetters"]>[0]): Promise<(DeadLetter & { cell: string })[]>;
  doctor(): Promise<{ ok: boolean; cells: Record<string, DoctorReport | { error: string }>; moves: SlotMove[] }>;
  /** The directory: each cell's slot count, and the moves under way. */
  directory(): Promise<{ cells: { name: string; slots: number }[]; moves: SlotMove[] }>;
  /**
   * Moves a slot (or the slot of a tenant) to another cell while traffic flows: fences it in its
   * cell, waits up to `waitMs` (default 60 s) for its queued events there to be delivered, copies
   * its streams, switches the directory, cleans the old cell. Not done in time: call again to
   * resume (or rollbackMove before the switch). docs/operations.md, "Cells".
   */
  move(target: { slot: number } | { tenant: string }, options: { to: string; waitMs?: number }): Promise<MoveReport>;
  /** Undoes a move that has not switched yet: the slot's appends go on in its old cell. */
  rollbackMove(slot: number): Promise<{ rolledBack: boolean }>;
}
