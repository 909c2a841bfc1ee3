// `corq cells migrate|status|place|move|rollback` (docs/cli.md, "corq cells"): the cells of a
// deployment, straight to their databases (CORQ_CELLS, CORQ_DIRECTORY_URL: src/cells/cellsEnv.ts)
// through createCells, as `corq migrate` goes to DATABASE_URL. Each action reads its command
// line before any connection is opened, then runs against the cells and closes them.
import { parseCellsEnv } from "../src/cells/cellsEnv.js";
import { CorqError } from "../src/errors.js";
import type { Cells, MoveReport } from "../src/types/cells.js";
import type { DoctorReport } from "../src/types/doctor.js";
import { integer, noMore, positional, UsageError, type Context } from "./arguments.js";
import { exitCodes } from "./output.js";
import { formatTable } from "./table.js";

/** `cells move` stopped waiting before the move was done: run it again to resume, or roll it back. */
export const NOT_FINISHED = 7;

export const cellsUsage = `usage: corq cells <action> (CORQ_CELLS="home=postgres://… two=postgres://…")

  migrate                              corq's schema in every cell, then the directory
  status [--json]                      the directory's slots per cell, the moves under way,
                                       each cell's log, subscriptions and doctor
  place <stream>                       its tenant, slot, cell and epoch
  move <slot|tenant> --to <cell>       move a slot (a number) or a tenant's slot to another
       [--wait-ms n]                   cell; waits up to n ms (60000) for its queued events;
       [--tenant t | --slot n]         exit ${NOT_FINISHED} when it stopped waiting: run it again to resume
  rollback <slot>                      undo a move that has not switched yet

Env: CORQ_CELLS (name=url pairs, home first), CORQ_DIRECTORY_URL (default: the home cell).
`;

type Action = (ctx: Context, names: string[]) => (cells: Cells) => Promise<number | undefined>;

const moveOnly = ["to", "wait-ms", "tenant", "slot"] as const;

export async function cellsCommand(ctx: Context): Promise<number | undefined> {
  const name = positional(ctx, { index: 0, name: "migrate|status|place|move|rollback" });
  if (name === "help") {
    ctx.io.out.write(cellsUsage);
    return exitCodes.ok;
  }
  const action = actions[name];
  if (!action) throw new UsageError(`unknown cells action: ${name} (migrate, status, place, move, rollback)`);
  if (name !== "move") {
    const given = moveOnly.find((option) => ctx.values[option] !== undefined);
    if (given) throw new UsageError(`cells ${name} takes no --${given}`);
  }
  let config: ReturnType<typeof parseCellsEnv>;
  try {
    config = parseCellsEnv(ctx.io.env);
  } catch (error) {
    throw error instanceof CorqError ? new UsageError(error.message) : error;
  }
  const runAction = action(ctx, Object.keys(config.cells));
  const { createCells } = await import("../src/cells/createCells.js");
  const cells = createCells({ cells: config.cells, directoryUrl: config.directoryUrl });
  try {
    return await runAction(cells);
  } catch (error) {
    const { code, message } = error as { code?: string; message?: string };
    // a database that does not answer: the exit code of a server that does not (output.ts)
    if (code === "database_unavailable") {
      ctx.io.err.write(`corq: ${withCause(error)}\n`);
      return exitCodes.unreachable;
    }
    // before the first `corq cells migrate` there is no directory (the router says so only once it exists, empty)
    if (code === "42P01" && message?.includes("corq_directory"))
      throw new CorqError("invalid_config", "the cells have no directory yet: run corq cells migrate first");
    throw error;
  } finally {
    await cells.close();
  }
}

const actions: Record<string, Action> = {
  migrate: (ctx) => {
    noMore(ctx, 1);
    return async function migrate(cells) {
      const { applied } = await cells.migrate();
      const directory = await cells.directory();
      const result = { applied, slots: Object.fromEntries(directory.cells.map((c) => [c.name, c.slots])) };
      ctx.print(result, () =>
        formatTable(
          ["cell", "slots", "migrations"],
          cells.names.map((cell) => [
            cell,
            result.slots[cell] ?? 0,
            applied[cell]?.length ? `applied ${applied[cell].join(", ")}` : "up to date",
          ]),
        ),
      );
      return undefined;
    };
  },

  status: (ctx) => {
    noMore(ctx, 1);
    return async function status(cells) {
      const directory = await cells.directory();
      const slots = new Map(directory.cells.map((c) => [c.name, c.slots]));
      // one cell that does not answer is shown as such: the others' state is what an operator needs then
      const perCell = await Promise.all(
        cells.names.map(async (name) => {
          const corq = cells.cell(name);
          try {
            const [stats, doctor] = await Promise.all([corq.stats(), corq.doctor()]);
            return {
              name,
              slots: slots.get(name) ?? 0,
              log: stats.log,
              subscriptions: stats.subscriptions.map(({ name, lag, lagEstimated, pending, keys, paused }) => ({
                name,
                lag,
                lagEstimated,
                pending,
                dead: keys.dead,
                paused,
              })),
              doctor: {
                ok: doctor.ok,
                // every code subscription is "orphaned" to this command, which defines none: not a finding here
                findings: doctor.findings
                  .filter((f) => f.code !== "subscription_orphaned")
                  .map(({ severity, code }) => ({ severity, code })),
              },
            };
          } catch (error) {
            return { name, slots: slots.get(name) ?? 0, error: withCause(error) };
          }
        }),
      );
      const result = { moves: directory.moves, cells: perCell };
      ctx.print(result, () => {
        const lines = [
          formatTable(
            ["cell", "slots", "events", "head", "doctor"],
            perCell.map((cell) =>
              "error" in cell
                ? [cell.name, cell.slots, "", "", `no answer: ${cell.error}`]
                : [
                    cell.name,
                    cell.slots,
                    `${cell.log.eventsEstimated ? "≈ " : ""}${cell.log.events}`,
                    cell.log.head ?? "none",
                    doctorSummary(cell.doctor),
                  ],
            ),
          ),
          "",
          "moves under way:",
          formatTable(
            ["slot", "from", "to", "phase", "copied", "waiting"],
            directory.moves.map((m) => [m.slot, m.from, m.to, m.phase, m.copied, m.waiting ?? ""]),
          ),
          "",
          "subscriptions:",
          formatTable(
            ["cell", "subscription", "lag", "pending", "dead", "paused"],
            perCell.flatMap((cell) =>
              "error" in cell
                ? []
                : cell.subscriptions.map((s) => [
                    cell.name,
                    s.name,
                    s.lagEstimated ? `≈ ${s.lag}` : s.lag,
                    s.pending,
                    s.dead,
                    s.paused ? "yes" : "",
                  ]),
            ),
          ),
        ];
        return lines.join("\n");
      });
      return undefined;
    };
  },

  place: (ctx) => {
    const stream = positional(ctx, { index: 1, name: "stream" });
    noMore(ctx, 2);
    return async function place(cells) {
      const found = await cells.place(stream);
      ctx.print(
        found,
        () =>
          `${found.stream}: tenant ${JSON.stringify(found.tenant)}, slot ${found.slot}, cell ${found.cell}, epoch ${found.epoch}`,
      );
      return undefined;
    };
  },

  move: (ctx, names) => {
    const target = moveTarget(ctx);
    const to = ctx.values.to;
    if (to === undefined) throw new UsageError(`--to is required: the cell to move to (${names.join(", ")})`);
    if (!names.includes(to)) throw new UsageError(`--to: no cell "${to}" in CORQ_CELLS (${names.join(", ")})`);
    const waitMs = integer(ctx.values["wait-ms"], { name: "wait-ms" });
    return async function move(cells) {
      const report = await cells.move(target, { to, waitMs });
      const what =
        "tenant" in target ? `slot ${report.slot} (tenant ${JSON.stringify(target.tenant)})` : `slot ${report.slot}`;
      ctx.print(report, () => describeMove(what, report));
      if (report.done) return exitCodes.ok;
      ctx.io.err.write(
        `corq: the move of ${what} is not finished (${report.phase}): run the same command again to resume, ` +
          `or corq cells rollback ${report.slot}\n`,
      );
      return NOT_FINISHED;
    };
  },

  rollback: (ctx) => {
    const slot = slotNumber(positional(ctx, { index: 1, name: "slot" }), "<slot>");
    noMore(ctx, 2);
    return async function rollback(cells) {
      const move = (await cells.directory()).moves.find((m) => m.slot === slot);
      const { rolledBack } = await cells.rollbackMove(slot);
      if (!rolledBack) await knownSlot(cells, slot);
      ctx.print({ slot, rolledBack }, () =>
        rolledBack && move
          ? `slot ${slot}: the move from ${move.from} to ${move.to} is rolled back; the slot stays in ${move.from}`
          : `slot ${slot}: no move under way, nothing to roll back`,
      );
      return undefined;
    };
  },
};

/** What `cells move` moves: `<slot|tenant>` (a number is a slot), or --slot / --tenant to say which. */
function moveTarget(ctx: Context): { slot: number } | { tenant: string } {
  const given = positional(ctx, { index: 1, name: "slot|tenant", optional: true });
  noMore(ctx, 2);
  const { tenant, slot } = ctx.values;
  const count = [given, tenant, slot].filter((value) => value !== undefined).length;
  if (count === 0) throw new UsageError("missing <slot|tenant> (or --slot n, --tenant t)");
  if (count > 1) throw new UsageError("give one of <slot|tenant>, --slot, --tenant");
  if (slot !== undefined) return { slot: slotNumber(slot, "--slot") };
  if (tenant !== undefined) return { tenant };
  const text = given as string;
  return /^\d+$/.test(text) ? { slot: slotNumber(text, "<slot>") } : { tenant: text };
}

function slotNumber(text: string, name: string): number {
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)))
    throw new UsageError(`${name} must be a slot number (an integer ≥ 0), got ${JSON.stringify(text)}`);
  return Number(text);
}

/** A slot outside the directory is refused by name (the directory has slots 0..n-1). */
async function knownSlot(cells: Cells, slot: number): Promise<void> {
  const total = (await cells.directory()).cells.reduce((sum, cell) => sum + cell.slots, 0);
  if (slot >= total)
    throw new CorqError("invalid_input", `slot ${slot} is not in the directory (slots 0 to ${total - 1})`);
}

function describeMove(what: string, report: MoveReport): string {
  if (report.done && report.from === report.to) return `${what} is in ${report.to} already: nothing to move`;
  const copied = `${report.copied} event${report.copied === 1 ? "" : "s"} copied`;
  if (report.done) return `${what} moved from ${report.from} to ${report.to}: ${copied}`;
  return [
    `${what}: moving from ${report.from} to ${report.to}, not finished: phase ${report.phase}, ${copied}`,
    ...(report.waiting ? [`waiting for: ${report.waiting}`] : []),
  ].join("\n");
}

/** An error's message with its first cause's ("connect ECONNREFUSED 10.0.0.7:5432": which database did not answer). */
function withCause(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  // createCells wraps a cell's error ("cell \"two\": …") around the CorqError around the driver's
  let cause = (error as { cause?: unknown }).cause;
  while (cause instanceof Error && message.includes(cause.message)) cause = cause.cause;
  return cause instanceof Error ? `${message} (${cause.message})` : message;
}

function doctorSummary(doctor: Pick<DoctorReport, "ok"> & { findings: { severity: string; code: string }[] }): string {
  if (doctor.findings.length === 0) return "ok";
  const codes = doctor.findings.map((f) => `${f.severity} ${f.code}`).join(", ");
  return `${doctor.ok ? "ok" : "not ok"}: ${codes}`;
}
