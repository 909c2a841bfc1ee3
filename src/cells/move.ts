// Moving a slot between cells while traffic flows (docs/architecture.md, "Cells"): fence it in
// its cell, wait for its queued events there to be delivered, copy its streams, switch the
// directory (the commit point: a new epoch), clean the old cell. Each phase is recorded in the
// directory before the next starts, so a move that stopped anywhere is resumed by calling again
// (every step is safe to repeat), or rolled back before the switch.
import type { SQL } from "drizzle-orm";
import type { Executor } from "../db/executor.js";
import { CorqError, present } from "../errors.js";
import type { CorqRuntime } from "../runtimeTypes.js";
import { dropSlot, fenceSlot, holdSlots, unfenceSlot } from "../sql/cells/cellSlots.js";
import { beginMove, endMove, readMove, setPhase, switchSlot, type MoveRow } from "../sql/cells/directory.js";
import {
  carrySeqs,
  deleteCopies,
  deleteMovedEvents,
  deleteMovedStreams,
  eventsToCopy,
  idempotencyToCopy,
  insertCopies,
  insertIdempotency,
  insertStreams,
  raiseWatermarks,
  seqsToCarry,
  slotBacklog,
  streamNames,
  streamsToCopy,
  type BacklogRow,
  type CopyRow,
  type IdempotencyCopyRow,
  type SeqRow,
  type StreamCopyRow,
} from "../sql/cells/moveData.js";
import type { MoveReport } from "../types/cells.js";
import type { Router } from "./router.js";
import { slotOf } from "./slots.js";

/** Events per copy or delete statement: each its own short transaction (a cell's horizon is never held long). */
const CHUNK = 1000;
const NAMES_PAGE = 5000;

export interface MoveDeps {
  directory: () => Promise<Executor>;
  router: Router;
  cell: (name: string) => CorqRuntime;
  tenantOf: (stream: string) => string;
}

export async function moveSlot(deps: MoveDeps, slot: number, to: string, waitMs: number): Promise<MoveReport> {
  const directory = await deps.directory();
  deps.cell(to); // an unknown cell is refused before anything is written
  let found = await readMoveRow(directory, slot);
  if (!found) {
    deps.router.forget();
    const place = await deps.router.placeSlot(slot);
    if (place.cell === to) return { slot, from: to, to, done: true, phase: "done", copied: 0, waiting: null };
    [found] = await directory.run<MoveRow>(beginMove(slot, place.cell, to, place.epoch));
    found ??= await readMoveRow(directory, slot);
    if (!found) throw new CorqError("conflict", `slot ${slot} changed while its move began; move it again`);
  }
  let move: MoveRow = found;
  if (move.to_cell !== to)
    throw new CorqError(
      "conflict",
      `slot ${slot} is being moved to "${move.to_cell}": resume that move (to "${move.to_cell}") or roll it back first`,
    );
  const from = deps.cell(move.from_cell);
  const target = deps.cell(to);
  const [source, sink] = [await from.database(), await target.database()];
  const report = (done: boolean, waiting: string | null = null): MoveReport => ({
    slot,
    from: move.from_cell,
    to,
    done,
    phase: done ? "done" : move.phase,
    copied: move.copied,
    waiting,
  });
  const next = async (phase: MoveRow["phase"], progress: Parameters<typeof setPhase>[2] = {}) => {
    await directory.run(setPhase(slot, phase, progress));
    move = { ...move, phase, copied: move.copied + (progress.copied ?? 0) };
  };
  const names = () => slotStreams(source, slot, deps);

  if (move.phase === "fencing") {
    // waits for the slot's appends in flight; every later one there writes nothing
    const fenced = await source.run(fenceSlot(slot, move.epoch));
    if (fenced.length === 0)
      throw new CorqError("conflict", `cell "${move.from_cell}" does not hold slot ${slot} at epoch ${move.epoch}`);
    await next("draining");
  }
  let streams = await names();
  if (move.phase === "draining") {
    const deadline = Date.now() + waitMs;
    // what was appended before the fence is enqueued (advance returns once every event
    // committed before it is: for the subscriptions this process runs — the backlog below counts
    // the slot's events any subscription has not advanced past), then delivered by the
    // deployment's consumers
    await from.advance();
    for (;;) {
      const backlog = await source.run<BacklogRow>(slotBacklog(streams));
      if (backlog.length === 0) break;
      const waiting = describeBacklog(backlog);
      if (Date.now() >= deadline) {
        await next("draining", { waiting });
        return report(false, waiting);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // nothing a subscription of the target cell has read past stays unread: copies are history
    await sink.run(raiseWatermarks());
    await next("copying");
  }
  if (move.phase === "copying") {
    let cursor = move.copied_tx === null ? null : { tx: move.copied_tx, position: Number(move.copied_position) };
    for (;;) {
      const rows = await source.run<CopyRow>(eventsToCopy(streams, cursor, CHUNK), { repeatable: true });
      if (rows.length === 0) break;
      await sink.run(insertCopies(rows), { repeatable: true });
      const last = present(rows.at(-1), "the chunk's last event");
      cursor = { tx: last.tx, position: Number(last.position) };
      await next("copying", { tx: cursor.tx, position: cursor.position, copied: rows.length });
      if (rows.length < CHUNK) break;
    }
    await sink.run(insertStreams(await source.run<StreamCopyRow>(streamsToCopy(streams))), { repeatable: true });
    await sink.run(insertIdempotency(await source.run<IdempotencyCopyRow>(idempotencyToCopy(streams))), {
      repeatable: true,
    });
    await sink.run(carrySeqs(await source.run<SeqRow>(seqsToCarry(streams))), { repeatable: true });
    await sink.run(raiseWatermarks());
    // the target holds the slot at the next epoch: no router sends anything there before the switch
    await sink.run(holdSlots([{ slot, epoch: move.epoch + 1 }]), { repeatable: true });
    await next("switching");
  }
  if (move.phase === "switching") {
    const switched = await directory.run(switchSlot(slot, to, move.epoch), { repeatable: true });
    if (switched.length === 0)
      throw new CorqError("conflict", `slot ${slot} left epoch ${move.epoch} outside this move`);
    move = { ...move, phase: "cleaning" };
    deps.router.forget();
  }
  // cleaning: the old cell gives the slot up (a routed read there now goes to the directory
  // again), then its copies of the slot's events go, chunk by chunk
  await source.run(dropSlot(slot, move.epoch), { repeatable: true });
  while (await deleted(source, deleteMovedEvents(streams, CHUNK)));
  await source.run(deleteMovedStreams(streams), { repeatable: true });
  streams = [];
  await directory.run(endMove(slot));
  return report(true);
}

/** Undoes a move before its switch: the copies go, the slot is its old cell's again. */
export async function rollbackSlot(deps: MoveDeps, slot: number): Promise<boolean> {
  const directory = await deps.directory();
  const move = await readMoveRow(directory, slot);
  if (!move) return false;
  if (move.phase === "cleaning")
    throw new CorqError("conflict", `slot ${slot} has switched to "${move.to_cell}": move it back instead`);
  const source = await deps.cell(move.from_cell).database();
  const sink = await deps.cell(move.to_cell).database();
  const streams = await slotStreams(source, slot, deps);
  await sink.run(dropSlot(slot, move.epoch + 1), { repeatable: true });
  while (await deleted(sink, deleteCopies(streams, CHUNK)));
  await sink.run(deleteMovedStreams(streams), { repeatable: true });
  await source.run(unfenceSlot(slot, move.epoch), { repeatable: true });
  await directory.run(endMove(slot));
  deps.router.forget();
  return true;
}

/** Runs one delete chunk: whether it deleted anything (another chunk may follow). */
async function deleted(db: Executor, chunk: SQL): Promise<boolean> {
  const [row] = await db.run<{ deleted: number }>(chunk, { repeatable: true });
  return (row?.deleted ?? 0) > 0;
}

async function readMoveRow(directory: Executor, slot: number): Promise<MoveRow | undefined> {
  const [row] = await directory.run<MoveRow>(readMove(slot), { repeatable: true });
  return row;
}

/** The slot's streams in a cell (every stream's name is read: a tenant is a function of it). */
async function slotStreams(db: Executor, slot: number, deps: MoveDeps): Promise<string[]> {
  const slots = (await deps.router.slots()).length;
  const found: string[] = [];
  for (let after = ""; ; ) {
    const page = await db.run<{ stream: string }>(streamNames(after, NAMES_PAGE), { repeatable: true });
    for (const { stream } of page) if (slotOf(deps.tenantOf(stream), slots) === slot) found.push(stream);
    if (page.length < NAMES_PAGE) return found;
    after = present(page.at(-1), "the page's last stream").stream;
  }
}

function describeBacklog(rows: BacklogRow[]): string {
  return rows
    .map((row) => {
      const parts = [`${row.queued} queued`];
      if (row.unadvanced > 0) parts.push(`${row.unadvanced} not advanced yet (where its code runs)`);
      if (row.dead_keys > 0) parts.push(`${row.dead_keys} dead keys (retry or skip them)`);
      if (row.paused_keys > 0) parts.push(`${row.paused_keys} paused keys`);
      if (row.paused) parts.push("the subscription is paused");
      if (row.rewinding) parts.push("a rewind is under way");
      if (row.next_due) parts.push(`next due ${row.next_due}`);
      return `${row.subscription}: ${parts.join(", ")}`;
    })
    .join("; ");
}
