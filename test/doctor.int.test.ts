// corq.doctor() on real Postgres: a transaction held open on a second connection is named by its
// pid (and the advance really waits behind it), a snapshot alone only by a warning; the schema
// against the code's; a failing, a stalled and an undelivered subscription, dead keys, an
// orphan; autovacuum switched off for a table; sessions a role without pg_read_all_stats cannot
// see into. Five statements, whatever it finds. (The cases Postgres cannot be put in here —
// prepared transactions, replication slots, ten minutes without vacuum, a full server — are
// judged from rows in test/doctor.test.ts.)
import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { createCorq, type DoctorFinding } from "../src/index.js";
import { createExecutor } from "../src/db/executor.js";
import { serverState, tableVacuum } from "../src/sql/inspect/doctor.js";
import { createTestDatabase } from "./helpers/database.js";
import { useCorq } from "./helpers/corq.js";

const open = useCorq();

const failing = { name: "failing", maxAttempts: 1, handle: () => Promise.reject(new Error("receiver down")) };
const byCode = (findings: DoctorFinding[], code: string) => findings.filter((f) => f.code === code);

/** A connection of its own holding a transaction open (with an xid, or a snapshot only). */
async function holdTransaction(url: string, kind: "xid" | "snapshot") {
  const client = new pg.Client({ connectionString: url, application_name: "held-by-test" });
  await client.connect();
  const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
  if (kind === "xid") {
    await client.query("BEGIN");
    await client.query("SELECT pg_current_xact_id()");
  } else {
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
    await client.query("SELECT count(*) FROM corq.events");
  }
  return { pid: rows[0]?.pid as number, end: () => client.end() };
}

describe("corq.doctor()", () => {
  it("a healthy database: ok, no finding, in 5 statements", async () => {
    const statements: string[] = [];
    const { corq } = await open({
      subscriptions: [{ name: "fine", handle: () => undefined }],
      onStatement: (text) => void statements.push(text),
    });
    await corq.append("s-1", [{ name: "E", data: {} }]);
    await corq.advance();
    await corq.drain("fine");
    statements.length = 0;
    expect(await corq.doctor()).toEqual({ ok: true, findings: [] });
    expect(statements).toHaveLength(5);
  });

  it("names the transaction that holds the xmin horizon by its pid, with its age, state and query; the advance waits behind it", async () => {
    const { corq, url } = await open({ subscriptions: [{ name: "fine", handle: () => undefined }] });
    await corq.advance();
    const held = await holdTransaction(url, "xid");
    try {
      // appended after the held transaction took its xid: above the horizon, not advanced
      await corq.append("s-1", [{ name: "E", data: {} }]);
      expect(await corq.advance()).toEqual({ fine: 0 });

      const report = await corq.doctor({ heldOverMs: 0 });
      expect(report.ok).toBe(false);
      const named = byCode(report.findings, "horizon_held").filter((f) => f.pid === held.pid);
      expect(named).toEqual([
        expect.objectContaining({
          severity: "error",
          holder: "transaction",
          holdsAdvance: true,
          state: "idle in transaction",
          query: "SELECT pg_current_xact_id()",
          application: "held-by-test",
          ageMs: expect.any(Number),
        }),
      ]);
      expect(named[0]?.fix).toContain(`SELECT pg_terminate_backend(${held.pid})`);
      expect(report.findings[0]?.severity).toBe("error");

      // under the threshold (a minute by default) it is no finding yet
      const byDefault = await corq.doctor();
      expect(byCode(byDefault.findings, "horizon_held").filter((f) => f.pid === held.pid)).toEqual([]);
    } finally {
      await held.end();
    }
    expect(await corq.advance()).toEqual({ fine: 1 });
    expect((await corq.doctor({ heldOverMs: 0 })).findings.filter((f) => f.pid === held.pid)).toEqual([]);
  });

  it("a snapshot without an xid holds vacuum, not the advance: a warning", async () => {
    const { corq, url } = await open({ subscriptions: [{ name: "fine", handle: () => undefined }] });
    const held = await holdTransaction(url, "snapshot");
    try {
      await corq.append("s-1", [{ name: "E", data: {} }]);
      expect(await corq.advance()).toEqual({ fine: 1 });
      const named = (await corq.doctor({ heldOverMs: 0 })).findings.filter((f) => f.pid === held.pid);
      expect(named).toMatchObject([{ severity: "warning", code: "horizon_held", holdsAdvance: false }]);
    } finally {
      await held.end();
    }
  });

  it("the schema: never migrated, a migration missing, one this version does not know", async () => {
    const bare = await createTestDatabase(inject("postgresUrl"), { migrated: false });
    const unmigrated = createCorq({ databaseUrl: bare.url });
    try {
      expect(await unmigrated.doctor()).toMatchObject({ ok: false, findings: [{ code: "schema_missing" }] });
    } finally {
      await unmigrated.close();
      await bare.drop();
    }

    const { corq, raw } = await open();
    await raw.query("DELETE FROM corq.migrations WHERE tag = '0016_idempotent_appends'");
    await raw.query("INSERT INTO corq.migrations (tag) VALUES ('9999_from_the_future'), ('app:own_tables')");
    const report = await corq.doctor();
    expect(report.ok).toBe(false);
    expect(report.findings).toMatchObject([
      { severity: "error", code: "schema_too_new", migrations: ["9999_from_the_future"] },
      { severity: "error", code: "schema_behind", migrations: ["0016_idempotent_appends"] },
    ]);
  });

  it("subscriptions: an advance that fails, one that is behind, a key nobody claims, dead keys, an orphan", async () => {
    const { corq, raw, another } = await open({
      subscriptions: [failing, { name: "fine", handle: () => undefined }, { name: "stuck", handle: () => undefined }],
    });
    await corq.append("s-1", [{ name: "E", data: {} }]);
    await corq.advance();
    expect(await corq.consume("failing")).toMatchObject({ outcome: "dead" });
    expect(await corq.doctor()).toMatchObject({
      ok: true,
      findings: [{ severity: "warning", code: "dead_keys", subscription: "failing", deadKeys: 1 }],
    });

    // stuck's key ready for 10 minutes, nothing acked: no consumer runs for it
    await raw.query(
      "UPDATE corq.keys SET available_at = now() - interval '10 minutes' WHERE subscription_id = (SELECT id FROM corq.subscriptions WHERE name = 'stuck')",
    );
    // events appended 10 minutes ago past fine's watermark: nothing advanced it since
    await corq.append("s-2", [{ name: "E", data: {} }]);
    await raw.query("UPDATE corq.events SET created_at = now() - interval '10 minutes' WHERE stream = 's-2'");
    await raw.query(
      "UPDATE corq.subscriptions SET advance_error = 'Error: boom', advance_error_at = now() WHERE name = 'failing'",
    );
    const report = await corq.doctor();
    expect(report.ok).toBe(false);
    const about = (code: string) => byCode(report.findings, code).map((f) => [f.severity, f.subscription]);
    expect(about("advance_failing")).toEqual([["error", "failing"]]);
    expect(byCode(report.findings, "advance_failing")[0]).toMatchObject({ error: "Error: boom" });
    expect(about("advance_behind")).toEqual([
      ["error", "fine"],
      ["error", "stuck"],
    ]);
    expect(byCode(report.findings, "advance_behind")[0]?.waitedMs).toBeGreaterThanOrEqual(600_000);
    expect(about("delivery_behind")).toEqual([["warning", "stuck"]]);
    expect(byCode(report.findings, "delivery_behind")[0]).toMatchObject({ ackedLast5Min: 0 });
    expect(about("dead_keys")).toEqual([["warning", "failing"]]);
    expect(about("subscription_orphaned")).toEqual([]);

    // an instance without their code: each is orphaned for it
    const other = another({ subscriptions: [{ name: "fine", handle: () => undefined }] });
    const seen = byCode((await other.doctor()).findings, "subscription_orphaned").map((f) => f.subscription);
    expect(seen).toEqual(["failing", "stuck"]);
  });

  it("autovacuum switched off for one of corq's tables is an error naming it", async () => {
    const { corq, raw } = await open();
    await raw.query("ALTER TABLE corq.queue SET (autovacuum_enabled = off)");
    expect(await corq.doctor()).toMatchObject({
      ok: false,
      findings: [{ severity: "error", code: "autovacuum_off", table: "queue" }],
    });
  });

  it("the statements' figures: corq's tables with their row counts; connections in use under the limit", async () => {
    const { raw } = await open();
    const db = createExecutor(raw);
    const tables = await db.run<{ table: string; live: string; dead: string }>(tableVacuum());
    expect(tables.map((t) => t.table)).toEqual(expect.arrayContaining(["events", "keys", "queue", "subscriptions"]));
    const [server] = await db.run<{ connections: number; max_connections: number; autovacuum: boolean }>(serverState());
    expect(server?.connections).toBeGreaterThanOrEqual(1);
    expect(server?.max_connections).toBeGreaterThan(server?.connections ?? 0);
    expect(server?.autovacuum).toBe(true);
  });

  it("a role without pg_read_all_stats: the sessions it cannot see into are a warning, with the grant", async () => {
    const { url, raw } = await open();
    const role = `corq_doctor_${randomBytes(4).toString("hex")}`;
    await raw.query(`CREATE ROLE ${role} LOGIN PASSWORD 'doctor'`);
    await raw.query(`GRANT USAGE ON SCHEMA corq TO ${role}; GRANT SELECT ON ALL TABLES IN SCHEMA corq TO ${role}`);
    const limited = new URL(url);
    limited.username = role;
    limited.password = "doctor";
    const corq = createCorq({ databaseUrl: limited.toString() });
    const held = await holdTransaction(url, "xid");
    try {
      const report = await corq.doctor({ heldOverMs: 0 });
      const [hidden] = byCode(report.findings, "sessions_hidden");
      expect(hidden).toMatchObject({ severity: "warning" });
      expect(hidden?.pids).toContain(held.pid);
      expect(hidden?.fix).toContain(`GRANT pg_read_all_stats TO ${role};`);
      // since when it is held, this role cannot tell: not named as horizon_held
      expect(report.findings.filter((f) => f.code === "horizon_held" && f.pid === held.pid)).toEqual([]);
    } finally {
      await held.end();
      await corq.close();
      await raw.query(`DROP OWNED BY ${role}; DROP ROLE ${role}`);
    }
  });
});
