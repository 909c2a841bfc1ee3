// createCells: corq over several databases (docs/architecture.md, "Cells"). Each cell is a full
// corq (src/corq.ts) on its own database; this layer routes a stream's writes and reads to the
// cell of its tenant's slot (src/cells/router.ts), runs the operations of subscriptions in every
// cell, and moves slots between cells (move.ts). It adds no statement to a cell's hot path but
// the fence of a routed append.
import { z } from "zod";
import { parseOrThrow, streamName } from "../config.js";
import { connect } from "../corq/connect.js";
import { createCorqRuntime } from "../corq.js";
import type { Executor } from "../db/executor.js";
import { CorqError, present, toError } from "../errors.js";
import type { CorqRuntime } from "../runtimeTypes.js";
import { holdSlots, holdsSlot } from "../sql/cells/cellSlots.js";
import {
  assignSlots,
  countSlots,
  DIRECTORY_SCHEMA,
  listMoves,
  type MoveRow,
  type SlotRow,
} from "../sql/cells/directory.js";
import type { AnyEvents, Corq, EventMap } from "../types.js";
import type { Cells, CellsOptions, SlotMove } from "../types/cells.js";
import { everyCell as everyCellOf, sum } from "./fanOut.js";
import { moveSlot, rollbackSlot } from "./move.js";
import { createRouter } from "./router.js";
import { DEFAULT_SLOTS, slotOf, tenantBeforeColon } from "./slots.js";

const cellName = z.string().regex(/^[A-Za-z0-9_-]{1,40}$/, "1-40 letters, digits, _ or -");
const cellsOptions = z.object({
  cells: z
    .record(cellName, z.string().min(1))
    .refine((cells) => Object.keys(cells).length > 0, "name one cell at least"),
  slots: z.number().int().min(1).max(65_536).default(DEFAULT_SLOTS),
  moveWaitMs: z.number().int().min(0).max(600_000).default(10_000),
});

export function createCells<E extends EventMap = AnyEvents>(options: NoInfer<CellsOptions<E>>): Cells<E>;
export function createCells(options: CellsOptions): Cells {
  return createCellsRuntime(options).cells;
}

/**
 * The same, with each cell's runtime (src/internal.ts): what `npm run serve` and the Worker drive
 * per cell (its runner, its dispatcher's consumer slots), beside the cells' own operations.
 */
export interface CellsRuntime {
  cells: Cells;
  runtimes: Map<string, CorqRuntime>;
  /** A read in a stream's cell, checked against the directory after it (read again where the slot went). */
  routedRead<T>(stream: string, read: (corq: CorqRuntime) => Promise<T>): Promise<T>;
}

/**
 * How a runtime other than Node's reaches the cells (the Worker: Neon's HTTP path per cell,
 * functions/database.ts). Default: a node-postgres pool per cell (createCorqRuntime over its
 * URL with the options given) and one of 3 connections for the directory.
 */
export interface OpenCells {
  /** A cell's runtime, made with the options the caller gave createCellsRuntime. */
  cell(name: string, url: string): CorqRuntime;
  /** The directory's executor (closed by its opener: close() leaves it). */
  directory(url: string): Executor;
}

export function createCellsRuntime(options: CellsOptions & { open?: OpenCells }): CellsRuntime {
  const { cells: urls, slots, moveWaitMs } = parseOrThrow(cellsOptions, options, "invalid_config", "cells");
  const { directoryUrl, tenant, cells: _urls, slots: _slots, moveWaitMs: _wait, open, ...corqOptions } = options;
  const names = Object.keys(urls);
  const home = present(names[0], "the home cell");
  const tenantOf = tenant ?? tenantBeforeColon;
  const runtimes = new Map(
    names.map((name) => {
      const url = present(urls[name], "a cell's URL");
      return [name, open ? open.cell(name, url) : createCorqRuntime({ ...corqOptions, databaseUrl: url })];
    }),
  );
  const directoryUrlOrHome = directoryUrl ?? present(urls[home], "the home cell's URL");
  const directoryConnection = open
    ? openedDirectory(open.directory(directoryUrlOrHome))
    : connect({ databaseUrl: directoryUrlOrHome, poolSize: 3 }, {});
  const directory = directoryConnection.executor;
  const router = createRouter(directory, tenantOf);
  const cell = (name: string): CorqRuntime => {
    const runtime = runtimes.get(name);
    if (!runtime) throw new CorqError("invalid_input", `no cell "${name}" (cells: ${names.join(", ")})`);
    return runtime;
  };
  const moveDeps = { directory, router, cell, tenantOf };
  const all = () => names.map((name) => ({ name, corq: cell(name) }));

  const fleet = { names, cell };
  const everyCell = <T>(fn: (corq: CorqRuntime, name: string) => Promise<T>) => everyCellOf(fleet, fn);

  // A routed read: read where the directory says, then check that cell still held the slot at
  // that epoch after the read (a move removes its copy only after it gave the slot up).
  async function routedRead<T>(stream: string, read: (corq: CorqRuntime) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const place = await router.place(stream);
      const corq = cell(place.cell);
      const result = await read(corq);
      const [row] = await (await corq.database()).run<{ holds: boolean }>(holdsSlot(place.slot, place.epoch));
      if (row?.holds) return result;
      router.forget();
      if (attempt >= 5) throw new CorqError("conflict", `slot ${place.slot} keeps moving; read again`);
    }
  }

  const cellsCorq: Cells = {
    names,
    cell: (name) => cell(name) as Corq,
    async migrate() {
      const applied: Record<string, string[]> = {};
      for (const [name, applies] of await everyCell((corq) => corq.migrate())) applied[name] = applies.applied;
      const db = await directory();
      await db.transaction(async (tx) => {
        for (const statement of DIRECTORY_SCHEMA) await tx.run(statement);
      });
      const [existing] = await db.run<{ slots: number }>(countSlots());
      if (!existing?.slots) {
        const empty = await everyCell(async (corq) => (await corq.stats()).log.head === null);
        const used = names.filter((name) => !empty.get(name));
        // a database with events keeps them routed to it: it must be the home cell, which takes every slot
        if (used.some((name) => name !== home))
          throw new CorqError(
            "invalid_config",
            `cell "${used.find((name) => name !== home)}" has events but is not named first: a new directory gives ` +
              "every slot to the first cell when any cell has events — name the database in use first",
          );
        await db.run(assignSlots(firstAssignment(names, slots, used.length === 0)));
      }
      // each cell holds what the directory gives it (again, harmlessly, on every migrate)
      router.forget();
      const rows = await router.slots();
      const moving = new Set((await db.run<MoveRow>(listMoves())).map((move) => move.slot));
      await everyCell(async (corq, name) => {
        const mine = rows.filter((row) => row.cell === name && !moving.has(row.slot));
        if (mine.length > 0) await (await corq.database()).run(holdSlots(mine));
      });
      return { applied };
    },
    place: (stream) => {
      parseOrThrow(streamName, stream, "invalid_input", "stream");
      return router.place(stream);
    },
    async append(stream, events, appendOptions = {}) {
      parseOrThrow(streamName, stream, "invalid_input", "stream");
      const deadline = Date.now() + moveWaitMs;
      for (let attempt = 0; ; attempt++) {
        const place = await router.place(stream);
        try {
          return await cell(place.cell).append(stream, events, {
            ...appendOptions,
            fence: { slot: place.slot, epoch: place.epoch },
          });
        } catch (error) {
          const code = (error as CorqError).code;
          // a caller's transaction is on one cell's database: it cannot be sent elsewhere
          if (appendOptions.tx !== undefined) throw error;
          if (code === "wrong_cell" && attempt < 5) {
            router.forget();
            continue;
          }
          if (code !== "slot_moving" || Date.now() >= deadline) throw error;
          await new Promise((resolve) => setTimeout(resolve, Math.min(50 * 2 ** attempt, 500)));
          router.forget();
        }
      }
    },
    readStream: (stream, readOptions) => routedRead(stream, (corq) => corq.readStream(stream, readOptions)),
    async eraseStream(stream) {
      const place = await router.place(stream);
      const moving = (await (await directory()).run<MoveRow>(listMoves())).some((move) => move.slot === place.slot);
      if (moving)
        throw new CorqError("slot_moving", `slot ${place.slot} is being moved; erase "${stream}" after the move`);
      return routedRead(stream, (corq) => corq.eraseStream(stream));
    },
    async advance(advanceOptions) {
      return sumByName(await everyCell((corq) => corq.advance(advanceOptions)));
    },
    async consume(subscription) {
      for (const { corq } of all()) {
        const result = await corq.consume(subscription);
        if (result) return result;
      }
      return null;
    },
    async drain(subscription, drainOptions) {
      const results = [...(await everyCell((corq) => corq.drain(subscription, drainOptions))).values()];
      return {
        first: results.find((result) => result.first !== null)?.first ?? null,
        batches: sum(results.map((result) => result.batches)),
        events: sum(results.map((result) => result.events)),
        waiting: sum(results.map((result) => result.waiting)),
      };
    },
    async readLog(readOptions = {}) {
      const after = readOptions.after ?? {};
      for (const name of Object.keys(after)) cell(name);
      const pages = await everyCell((corq, name) =>
        corq.readLog({ after: after[name] ?? 0, limit: readOptions.limit }),
      );
      const next: Record<string, number | null> = {};
      const events = [...pages].flatMap(([name, page]) => {
        next[name] = page.next ?? after[name] ?? null;
        return page.events.map((event) => ({ ...event, cell: name }));
      });
      return { events, next };
    },
    async stats() {
      const perCell = await everyCell((corq) => corq.stats());
      const bySubscription = new Map<
        string,
        { name: string; lag: number; pending: number; keys: Record<string, number> }
      >();
      for (const stats of perCell.values())
        for (const sub of stats.subscriptions) {
          const total = bySubscription.get(sub.name) ?? { name: sub.name, lag: 0, pending: 0, keys: {} };
          total.lag += sub.lag;
          total.pending += sub.pending;
          for (const [status, count] of Object.entries(sub.keys))
            if (typeof count === "number") total.keys[status] = (total.keys[status] ?? 0) + count;
          bySubscription.set(sub.name, total);
        }
      const logs = [...perCell.values()].map((stats) => stats.log);
      return {
        cells: Object.fromEntries(perCell),
        subscriptions: [...bySubscription.values()],
        log: { events: sum(logs.map((log) => log.events)), eventsEstimated: logs.some((log) => log.eventsEstimated) },
      };
    },
    async keys(subscription, keyOptions = {}) {
      const limit = keyOptions.limit ?? 100;
      const pages = await everyCell((corq) => corq.keys(subscription, keyOptions));
      return [...pages]
        .flatMap(([name, keys]) => keys.map((key) => ({ ...key, cell: name })))
        .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : names.indexOf(a.cell) - names.indexOf(b.cell)))
        .slice(0, limit);
    },
    async key(subscription, key) {
      const found = await everyCell((corq) =>
        corq.key(subscription, key).catch((error: unknown) => {
          if ((error as CorqError).code === "unknown_key") return null;
          throw error;
        }),
      );
      const keys = [...found].flatMap(([name, state]) => (state ? [{ ...state, cell: name }] : []));
      if (keys.length === 0)
        throw new CorqError("unknown_key", `subscription "${subscription}" has no key "${key}" in any cell`);
      return keys;
    },
    async pauseKey(subscription, key) {
      await everyCell((corq) => corq.pauseKey(subscription, key));
    },
    async resumeKey(subscription, key) {
      await everyCell((corq) => corq.resumeKey(subscription, key));
    },
    async rewind(subscription, rewindOptions) {
      const { cell: only, ...rest } = rewindOptions;
      if (typeof rest.to === "number" && only === undefined)
        throw new CorqError(
          "invalid_input",
          'a position is one cell\'s: rewind to a position needs `cell` (or `to: "beginning"`)',
        );
      if (only !== undefined) return cell(only).rewind(subscription, rest);
      return {
        requeued: sum(
          [...(await everyCell((corq) => corq.rewind(subscription, rest))).values()].map((r) => r.requeued),
        ),
      };
    },
    async deadLetters(deadOptions = {}) {
      const lists = await everyCell((corq) => corq.deadLetters(deadOptions));
      return [...lists]
        .flatMap(([name, dead]) => dead.map((letter) => ({ ...letter, cell: name })))
        .sort((a, b) => (a.deadAt < b.deadAt ? 1 : a.deadAt > b.deadAt ? -1 : 0))
        .slice(0, deadOptions.limit ?? 100);
    },
    async releaseDeadLetters(releaseOptions) {
      const released = await everyCell((corq) => corq.releaseDeadLetters(releaseOptions));
      return { released: sum([...released.values()].map((r) => r.released)) };
    },
    async putSubscription(name, input) {
      // the home cell first: a secret it makes is the one every cell signs with
      const first = await cell(home).putSubscription(name, input);
      const shared = first.secret === undefined ? input : withSecret(input, first.secret);
      await everyCell((corq, cellName) =>
        cellName === home ? Promise.resolve() : corq.putSubscription(name, shared).then(() => undefined),
      );
      return first;
    },
    async deleteSubscription(name) {
      await everyCell((corq) => corq.deleteSubscription(name));
    },
    async pause(subscription) {
      await everyCell((corq) => corq.pause(subscription));
    },
    async resume(subscription) {
      await everyCell((corq) => corq.resume(subscription));
    },
    async doctor() {
      const reports = await Promise.all(
        all().map(
          async ({ name, corq }) =>
            [name, await corq.doctor().catch((error: unknown) => ({ error: toError(error).message }))] as const,
        ),
      );
      const moves = await listSlotMoves();
      const ok =
        reports.every(([, report]) => "ok" in report && report.ok) && moves.every((move) => move.waiting === null);
      return { ok, cells: Object.fromEntries(reports), moves };
    },
    async directory() {
      const rows = await (router.forget(), router.slots());
      return {
        cells: names.map((name) => ({ name, slots: rows.filter((row) => row.cell === name).length })),
        moves: await listSlotMoves(),
      };
    },
    async move(target, moveOptions) {
      const slot = "slot" in target ? target.slot : slotOf(String(target.tenant), (await router.slots()).length);
      if (!Number.isInteger(slot)) throw new CorqError("invalid_input", "slot: an integer");
      return moveSlot(moveDeps, slot, moveOptions.to, moveOptions.waitMs ?? 60_000);
    },
    async rollbackMove(slot) {
      return { rolledBack: await rollbackSlot(moveDeps, slot) };
    },
    async close() {
      await Promise.allSettled(all().map(({ corq }) => corq.close()));
      await directoryConnection.end();
    },
  };
  async function listSlotMoves(): Promise<SlotMove[]> {
    const rows = await (await directory()).run<MoveRow>(listMoves(), { repeatable: true });
    return rows.map((row) => ({
      slot: row.slot,
      from: row.from_cell,
      to: row.to_cell,
      epoch: row.epoch,
      phase: row.phase,
      copied: row.copied,
      startedAt: new Date(row.started_at).toISOString(),
      updatedAt: new Date(row.updated_at).toISOString(),
      waiting: row.waiting,
    }));
  }
  return { cells: cellsCorq, runtimes, routedRead };
}

const openedDirectory = (executor: Executor) => ({ executor: async () => executor, end: async () => undefined });

/**
 * The directory's first slots: spread over the cells in turn when every cell is empty, else all
 * in the home cell (a database that already has events becomes the first cell, unchanged).
 */
export function firstAssignment(names: string[], slots: number, spread: boolean): SlotRow[] {
  return Array.from({ length: slots }, (_, slot) => ({
    slot,
    cell: present(names[spread ? slot % names.length : 0], "a cell's name"),
    epoch: 1,
  }));
}

function withSecret(input: unknown, secret: string): unknown {
  if (typeof input !== "object" || input === null) return input;
  const deliver = (input as { deliver?: unknown }).deliver;
  if (typeof deliver !== "object" || deliver === null) return input;
  return { ...input, deliver: { ...deliver, secret } };
}

function sumByName(results: Map<string, Record<string, number>>): Record<string, number> {
  const total: Record<string, number> = {};
  for (const counts of results.values())
    for (const [name, count] of Object.entries(counts)) total[name] = (total[name] ?? 0) + count;
  return total;
}
