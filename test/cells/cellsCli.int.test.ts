// `corq cells …` (cli/cellsCommand.ts, in-process through cli/run.ts) on three separate clusters
// (test/helpers/cells.ts): migrate and status, place, a tenant moved from one database to
// another, a move that stops waiting and is rolled back, and the command lines it refuses.
import { describe, expect, it } from "vitest";
import { run } from "../../cli/run.js";
import { slotOf } from "../../src/cells/slots.js";
import { createCells, createCorq } from "../../src/index.js";
import { type CellUrls, useThreeCells } from "../helpers/cells.js";

const three = useThreeCells();

async function corq(args: string[], env: Record<string, string>) {
  let out = "";
  let err = "";
  const code = await run(args, {
    env,
    out: { write: (text: string) => (out += text) },
    err: { write: (text: string) => (err += text) },
  });
  return { code, out, err, json: () => JSON.parse(out) };
}

const cellsEnv = (urls: CellUrls) => ({ CORQ_CELLS: `one=${urls.one}\ntwo=${urls.two}  three=${urls.three}` });

/** Status as a script reads it: slots, log events and the doctor's answer per cell, and the moves. */
async function status(env: Record<string, string>) {
  const { code, json } = await corq(["cells", "status", "--json"], env);
  expect(code).toBe(0);
  const { cells, moves } = json() as {
    cells: { name: string; slots: number; log: { events: number }; doctor: { ok: boolean } }[];
    moves: { slot: number; from: string; to: string; phase: string; waiting: string | null }[];
  };
  return {
    moves,
    cells: Object.fromEntries(cells.map((c) => [c.name, { slots: c.slots, events: c.log.events, ok: c.doctor.ok }])),
  };
}

describe("corq cells", () => {
  it("migrates every cell and spreads the slots over three empty ones; status shows each cell", async () => {
    const env = cellsEnv(await three.databases());
    const migrated = await corq(["cells", "migrate"], env);
    expect(migrated).toMatchObject({ code: 0, err: "" });
    expect(migrated.out).toMatch(/^one\s+342\s+applied \d{4}_/m);
    expect(migrated.out).toMatch(/^two\s+341\s+applied \d{4}_/m);
    expect(migrated.out).toMatch(/^three\s+341\s+applied \d{4}_/m);
    const again = await corq(["cells", "migrate", "--json"], env);
    expect(again.json()).toEqual({
      applied: { one: [], two: [], three: [] },
      slots: { one: 342, two: 341, three: 341 },
    });

    expect(await status(env)).toEqual({
      moves: [],
      cells: {
        one: { slots: 342, events: 0, ok: true },
        two: { slots: 341, events: 0, ok: true },
        three: { slots: 341, events: 0, ok: true },
      },
    });
    const text = await corq(["cells", "status"], env);
    expect(text.code).toBe(0);
    expect(text.out).toMatch(/^cell\s+slots\s+events\s+head\s+doctor\n/);
    expect(text.out).toMatch(/^two\s+341\s+0\s+none\s+ok$/m);
    expect(text.out).toMatch(/moves under way:\n\(none\)/);
  });

  it("goes from one database to three: place, then a tenant moved with its events to cell two", async () => {
    const urls = await three.databases();
    // the database there was: events before any cell existed
    const before = createCorq({ databaseUrl: urls.one });
    try {
      await before.migrate();
      await before.append("acme:order-1", [
        { name: "Placed", data: {} },
        { name: "Paid", data: {} },
      ]);
      await before.append("zeta:1", [{ name: "Made", data: {} }]);
    } finally {
      await before.close();
    }
    const env = cellsEnv(urls);
    expect((await corq(["cells", "migrate", "--json"], env)).json().slots).toEqual({ one: 1024, two: 0, three: 0 });

    const slot = slotOf("acme", 1024);
    const placed = await corq(["cells", "place", "acme:order-1"], env);
    expect(placed).toMatchObject({ code: 0, out: `acme:order-1: tenant "acme", slot ${slot}, cell one, epoch 1\n` });

    const moved = await corq(["cells", "move", "acme", "--to", "two"], env);
    expect(moved).toMatchObject({
      code: 0,
      err: "",
      out: `slot ${slot} (tenant "acme") moved from one to two: 2 events copied\n`,
    });
    expect((await corq(["cells", "place", "acme:order-1", "--json"], env)).json()).toEqual({
      stream: "acme:order-1",
      tenant: "acme",
      slot,
      cell: "two",
      epoch: 2,
    });
    expect(await status(env)).toMatchObject({
      moves: [],
      cells: { one: { slots: 1023, events: 1 }, two: { slots: 1, events: 2 }, three: { slots: 0, events: 0 } },
    });

    // a number is a slot
    const bySlot = await corq(["cells", "move", String(slot), "--to", "three", "--json"], env);
    expect(bySlot.code).toBe(0);
    expect(bySlot.json()).toEqual({
      slot,
      from: "two",
      to: "three",
      done: true,
      phase: "done",
      copied: 2,
      waiting: null,
    });
    expect((await corq(["cells", "place", "acme:x"], env)).out).toMatch(/cell three, epoch 3\n$/);
  });

  it("a move that cannot finish exits 7 and says what to do; status lists it; rollback ends it", async () => {
    const urls = await three.databases();
    const env = cellsEnv(urls);
    // a deployment with a subscription whose event is queued and not delivered
    const app = createCells({
      cells: urls,
      subscriptions: [{ name: "byStream", key: "stream", handle: async () => {} }],
    });
    try {
      await app.migrate();
      const place = await app.place("zeta:1");
      const to = app.names.find((name) => name !== place.cell) as string;
      await app.append("zeta:1", [{ name: "Made", data: {} }]);
      await app.advance();

      const stopped = await corq(["cells", "move", "--tenant", "zeta", "--to", to, "--wait-ms", "0"], env);
      expect(stopped.code).toBe(7);
      expect(stopped.out).toBe(
        `slot ${place.slot} (tenant "zeta"): moving from ${place.cell} to ${to}, not finished: phase draining, 0 events copied\n` +
          "waiting for: byStream: 1 queued\n",
      );
      expect(stopped.err).toBe(
        `corq: the move of slot ${place.slot} (tenant "zeta") is not finished (draining): run the same command again ` +
          `to resume, or corq cells rollback ${place.slot}\n`,
      );
      const listed = await status(env);
      expect(listed.moves).toMatchObject([
        { slot: place.slot, from: place.cell, to, phase: "draining", waiting: "byStream: 1 queued" },
      ]);
      expect((await corq(["cells", "status"], env)).out).toMatch(
        new RegExp(`^${place.slot}\\s+${place.cell}\\s+${to}\\s+draining\\s+0\\s+byStream: 1 queued$`, "m"),
      );

      const rolledBack = await corq(["cells", "rollback", String(place.slot)], env);
      expect(rolledBack).toMatchObject({
        code: 0,
        out: `slot ${place.slot}: the move from ${place.cell} to ${to} is rolled back; the slot stays in ${place.cell}\n`,
      });
      expect((await status(env)).moves).toEqual([]);
      expect((await corq(["cells", "place", "zeta:1", "--json"], env)).json()).toMatchObject({
        cell: place.cell,
        epoch: place.epoch,
      });
      // the slot's appends go on in its cell
      await app.append("zeta:1", [{ name: "Again", data: {} }]);
      expect((await corq(["cells", "rollback", String(place.slot)], env)).out).toBe(
        `slot ${place.slot}: no move under way, nothing to roll back\n`,
      );
    } finally {
      await app.close();
    }
  });

  it("refuses a missing CORQ_CELLS, an unknown cell, a bad slot or action with one line and a non-zero exit", async () => {
    const urls = await three.databases();
    const env = cellsEnv(urls);
    const refusals: { args: string[]; env?: Record<string, string>; code: number; err: RegExp }[] = [
      { args: ["cells", "status"], env: {}, code: 2, err: /^corq: CORQ_CELLS is not set/ },
      {
        args: ["cells", "status"],
        env: { CORQ_CELLS: `one=${urls.one} two=postgres://corq:s3cret@db.example/x?a=b three` },
        code: 2,
        err: /^corq: CORQ_CELLS entry 3 is not name=postgres:\/\/…: "three"$/,
      },
      { args: ["cells", "move", "acme", "--to", "four"], code: 2, err: /^corq: --to: no cell "four" in CORQ_CELLS/ },
      { args: ["cells", "move", "acme"], code: 2, err: /^corq: --to is required/ },
      { args: ["cells", "move", "--slot", "x1", "--to", "two"], code: 2, err: /^corq: --slot must be a slot number/ },
      { args: ["cells", "move", "1", "--tenant", "a", "--to", "two"], code: 2, err: /give one of/ },
      { args: ["cells", "move", "acme", "--to", "two", "--wait-ms", "soon"], code: 2, err: /--wait-ms must be/ },
      { args: ["cells", "rollback", "one"], code: 2, err: /^corq: <slot> must be a slot number/ },
      { args: ["cells", "status", "--to", "two"], code: 2, err: /^corq: cells status takes no --to$/ },
      { args: ["stats", "--slot", "1"], code: 2, err: /^corq: stats takes no --slot$/ },
      { args: ["cells", "nope"], code: 2, err: /^corq: unknown cells action: nope/ },
      { args: ["cells"], code: 2, err: /^corq: missing <migrate\|status\|place\|move\|rollback>$/ },
      // against the databases: not migrated yet, then a slot the directory does not have
      {
        args: ["cells", "place", "acme:1"],
        code: 1,
        err: /^corq: the cells have no directory yet: run corq cells migrate first$/,
      },
      { args: ["cells", "status"], code: 1, err: /^corq: the cells have no directory yet/ },
      { args: ["cells", "migrate"], code: 0, err: /^$/ },
      // a database that does not answer: exit 3, as for a server that does not, naming the cell and its host
      {
        args: ["cells", "migrate"],
        env: { CORQ_CELLS: `one=${urls.one} two=postgres://corq:s3cret@127.0.0.1:1/corq` },
        code: 3,
        err: /^corq: cell "two": the database is unreachable; try again \(.*connect ECONNREFUSED 127\.0\.0\.1:1\)$/,
      },
      { args: ["cells", "move", "4096", "--to", "two"], code: 1, err: /^corq: slot 4096 is not in the directory/ },
      { args: ["cells", "rollback", "4096"], code: 1, err: /^corq: slot 4096 is not in the directory/ },
    ];
    for (const refusal of refusals) {
      const { code, err } = await corq(refusal.args, refusal.env ?? env);
      expect({ args: refusal.args, code, err: err.replace(/\n$/, "") }).toEqual({
        args: refusal.args,
        code: refusal.code,
        err: expect.stringMatching(refusal.err),
      });
      // one line, no stack trace, no password
      expect(err).toMatch(/^[^\n]*\n?$/);
      expect(err).not.toMatch(/s3cret|\n\s+at /);
    }
  });
});
