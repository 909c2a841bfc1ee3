// The doctor's judgement (src/doctor.ts) from rows as its statements return them, for the cases a
// test database cannot be put in: a prepared transaction (max_prepared_transactions is 0 here), a
// replication slot with an xmin (no standby, no logical wal_level), ten minutes without a vacuum,
// a server near max_connections. test/doctor.int.test.ts runs the statements themselves.
import { describe, expect, it } from "vitest";
import {
  connectionFindings,
  diagnose,
  formatDuration,
  heldHorizonFindings,
  hiddenSessionFindings,
  schemaFindings,
  subscriptionFindings,
  vacuumFindings,
  type DoctorInput,
} from "../src/doctor.js";
import type {
  HeldHorizonRow,
  ServerStateRow,
  SubscriptionHealthRow,
  TableVacuumRow,
} from "../src/sql/inspect/doctor.js";

const MIN = 60_000;
const server: ServerStateRow = {
  connections: 5,
  max_connections: 97,
  autovacuum: true,
  track_counts: true,
  role: "app",
};
const session = (over: Partial<HeldHorizonRow>): HeldHorizonRow => ({
  holder: "transaction",
  pid: 4242,
  name: null,
  database: "shop",
  user: "app",
  application: "billing",
  state: "idle in transaction",
  query: "UPDATE accounts SET balance = 0",
  age_ms: String(3 * MIN + 5000),
  holds_advance: true,
  ...over,
});
const subscription = (over: Partial<SubscriptionHealthRow>): SubscriptionHealthRow => ({
  name: "billing",
  kind: "push",
  paused: false,
  advance_error: null,
  advance_error_at: null,
  rewinding: null,
  dead: 0,
  unadvanced_ms: null,
  ready_waited_ms: null,
  acked_recently: "0",
  max_delay_ms: "86400000",
  delayed_keys: 0,
  delayed_until: null,
  ...over,
});
const table = (over: Partial<TableVacuumRow>): TableVacuumRow => ({
  table: "keys",
  live: "1000",
  dead: "50000",
  last_vacuum: new Date(Date.now() - 20 * MIN),
  vacuumed_ms: String(20 * MIN),
  autovacuum_disabled: false,
  ...over,
});
const clean: DoctorInput = {
  horizons: [],
  applied: ["0000_init", "0001_storage", "app:tables"],
  known: ["0000_init", "0001_storage"],
  subscriptions: [subscription({})],
  code: new Set(),
  tables: [table({ dead: "10", live: "10" })],
  server,
};

describe("the doctor's findings", () => {
  it("a clean database: ok, nothing found (an app's own migrations are not corq's business)", () => {
    expect(diagnose(clean)).toEqual({ ok: true, findings: [] });
  });

  it("a transaction with an xid holds the advance: an error naming pid, age, state and query, and pg_terminate_backend", () => {
    const [finding] = heldHorizonFindings([session({})]);
    expect(finding).toMatchObject({
      severity: "error",
      code: "horizon_held",
      holder: "transaction",
      pid: 4242,
      ageMs: 185_000,
      holdsAdvance: true,
      state: "idle in transaction",
      query: "UPDATE accounts SET balance = 0",
      database: "shop",
      user: "app",
      application: "billing",
    });
    expect(finding?.message).toContain(
      "pid 4242 (idle in transaction, billing, role app, database shop; last query: UPDATE",
    );
    expect(finding?.message).toContain("for 3 min 5 s");
    expect(finding?.message).toContain("no advance moves any subscription past it");
    expect(finding?.fix).toContain("SELECT pg_terminate_backend(4242)");
  });

  it("a snapshot without an xid holds vacuum only: a warning that says the advance is not held", () => {
    const [finding] = heldHorizonFindings([
      session({ holds_advance: false, state: "active", query: "SELECT report()" }),
    ]);
    expect(finding).toMatchObject({ severity: "warning", code: "horizon_held", pid: 4242, holdsAdvance: false });
    expect(finding?.message).toContain("the advance is not held");
    expect(finding?.fix).toContain("pg_cancel_backend(4242)");
  });

  it("a prepared transaction: an error with its gid quoted for COMMIT / ROLLBACK PREPARED, no pid", () => {
    const [finding] = heldHorizonFindings([
      session({ holder: "prepared transaction", pid: null, name: "xa'1", application: null, state: null, query: null }),
    ]);
    expect(finding).toMatchObject({
      severity: "error",
      code: "horizon_held",
      holder: "prepared transaction",
      pid: null,
      name: "xa'1",
      holdsAdvance: true,
    });
    expect(finding?.fix).toContain("COMMIT PREPARED 'xa''1'; or ROLLBACK PREPARED 'xa''1';");
    expect(finding?.fix).toContain("in database shop");
  });

  it("a replication slot nobody reads: an error with pg_drop_replication_slot; its age unknown on an older Postgres", () => {
    const slot = session({
      holder: "replication slot",
      pid: null,
      name: "cdc",
      state: "logical",
      user: null,
      application: null,
      query: null,
      holds_advance: false,
      age_ms: null,
    });
    const [finding] = heldHorizonFindings([slot]);
    expect(finding).toMatchObject({ severity: "error", holder: "replication slot", name: "cdc", ageMs: null });
    expect(finding?.message).toContain(
      "Replication slot 'cdc' (logical, database shop) is not in use, and keeps an xmin",
    );
    expect(finding?.fix).toContain("pg_drop_replication_slot('cdc')");
    expect(heldHorizonFindings([{ ...slot, age_ms: String(2 * 3_600_000) }])[0]?.message).toContain(
      "has not been for 2 h",
    );
  });

  it("sessions this role may not see into: one warning naming them and the grant", () => {
    const hidden = session({ holder: "hidden", pid: 77, user: "postgres", state: null, query: null, age_ms: null });
    expect(heldHorizonFindings([hidden])).toEqual([]);
    const [finding] = hiddenSessionFindings([hidden, { ...hidden, pid: 78 }], "app");
    expect(finding).toMatchObject({ severity: "warning", code: "sessions_hidden", pids: [77, 78] });
    expect(finding?.fix).toBe(
      "GRANT pg_read_all_stats TO app; (or pg_monitor), or run the doctor as a role that has it.",
    );
  });

  it("the schema: missing, behind (the migrations to apply), too new (the ones it does not know)", () => {
    expect(schemaFindings(null, ["0000_init"])).toMatchObject([{ severity: "error", code: "schema_missing" }]);
    expect(schemaFindings(["0000_init"], ["0000_init", "0001_storage"])).toMatchObject([
      { severity: "error", code: "schema_behind", migrations: ["0001_storage"] },
    ]);
    expect(schemaFindings(["0000_init", "0099_future"], ["0000_init"])).toMatchObject([
      { severity: "error", code: "schema_too_new", migrations: ["0099_future"] },
    ]);
  });

  it("a subscription: a failing advance, one behind (an error; a warning while a rewind holds it), dead keys, orphaned", () => {
    const none = { code: new Set<string>(), heldAdvance: false };
    expect(
      subscriptionFindings(
        subscription({
          advance_error: "Error: boom",
          advance_error_at: "2026-12-02T10:00:00Z",
          unadvanced_ms: "900000",
        }),
        none,
      ),
    ).toMatchObject([
      { severity: "error", code: "advance_failing", error: "Error: boom", failedAt: "2026-12-02T10:00:00.000Z" },
    ]);
    expect(subscriptionFindings(subscription({ unadvanced_ms: String(5 * MIN) }), none)).toEqual([]);
    const [behind] = subscriptionFindings(subscription({ unadvanced_ms: String(6 * MIN) }), none);
    expect(behind).toMatchObject({ severity: "error", code: "advance_behind", waitedMs: 6 * MIN });
    expect(behind?.fix).toContain("POST /advance");
    const [held] = subscriptionFindings(subscription({ unadvanced_ms: String(6 * MIN) }), {
      ...none,
      heldAdvance: true,
    });
    expect(held?.message).toContain("horizon_held");
    expect(
      subscriptionFindings(subscription({ unadvanced_ms: String(6 * MIN), rewinding: "live" }), none),
    ).toMatchObject([{ severity: "warning", code: "advance_behind" }]);
    expect(subscriptionFindings(subscription({ dead: 3 }), none)).toMatchObject([
      { severity: "warning", code: "dead_keys", deadKeys: 3, subscription: "billing" },
    ]);
    expect(subscriptionFindings(subscription({ kind: "code" }), none)).toMatchObject([
      { severity: "warning", code: "subscription_orphaned" },
    ]);
    expect(subscriptionFindings(subscription({ kind: "code" }), { ...none, code: new Set(["billing"]) })).toEqual([]);
  });

  it("delayed keys: a warning with how many, until when and the subscription's maxDelayMs", () => {
    const none = { code: new Set<string>(), heldAdvance: false };
    const [delayed] = subscriptionFindings(
      subscription({ delayed_keys: 2, delayed_until: "2027-01-01T00:00:00Z", max_delay_ms: String(366 * 86_400_000) }),
      none,
    );
    expect(delayed).toMatchObject({
      severity: "warning",
      code: "delayed_keys",
      subscription: "billing",
      delayedKeys: 2,
      delayedUntil: "2027-01-01T00:00:00.000Z",
      maxDelayMs: 366 * 86_400_000,
    });
    expect(delayed?.message).toContain("up to the subscription's maxDelayMs (366 d)");
    expect(delayed?.fix).toContain("GET /subscriptions/billing/keys?status=backoff");
    expect(diagnose({ ...clean, subscriptions: [subscription({ delayed_keys: 1 })] }).ok).toBe(true);
  });

  it("delivery behind: a key ready over 5 minutes; no consumer at all, or too slow ones; not while paused", () => {
    const none = { code: new Set<string>(), heldAdvance: false };
    const [idle] = subscriptionFindings(subscription({ ready_waited_ms: String(6 * MIN) }), none);
    expect(idle).toMatchObject({ severity: "warning", code: "delivery_behind", ackedLast5Min: 0 });
    expect(idle?.message).toContain("No consumer is running for it");
    const [slow] = subscriptionFindings(
      subscription({ ready_waited_ms: String(6 * MIN), acked_recently: "120" }),
      none,
    );
    expect(slow?.message).toContain("slower than the events that come in");
    expect(subscriptionFindings(subscription({ ready_waited_ms: String(6 * MIN), paused: true }), none)).toEqual([]);
    expect(subscriptionFindings(subscription({ ready_waited_ms: String(-MIN) }), none)).toEqual([]);
  });

  it("vacuum: off for the server or a table is an error; many dead rows and ten quiet minutes a warning", () => {
    const off = vacuumFindings([], { ...server, autovacuum: false }, { horizonHeld: false });
    expect(off).toMatchObject([{ severity: "error", code: "autovacuum_off", table: null }]);
    expect(vacuumFindings([], { ...server, track_counts: false }, { horizonHeld: false })[0]?.message).toContain(
      "track_counts is off",
    );
    expect(
      vacuumFindings([table({ autovacuum_disabled: true, dead: "0" })], server, { horizonHeld: false }),
    ).toMatchObject([{ severity: "error", code: "autovacuum_off", table: "keys" }]);
    const [behind] = vacuumFindings([table({})], server, { horizonHeld: false });
    expect(behind).toMatchObject({ severity: "warning", code: "vacuum_behind", table: "keys", deadRows: 50_000 });
    expect(behind?.message).toContain("for 20 min");
    expect(vacuumFindings([table({})], server, { horizonHeld: true })[0]?.fix).toContain("horizon_held");
    // normal churn: few dead rows, fewer than live, or a vacuum within ten minutes
    for (const quiet of [{ dead: "9999" }, { live: "60000" }, { vacuumed_ms: String(9 * MIN) }])
      expect(vacuumFindings([table(quiet)], server, { horizonHeld: false }), JSON.stringify(quiet)).toEqual([]);
    expect(
      vacuumFindings([table({ vacuumed_ms: null, last_vacuum: null })], server, { horizonHeld: false }),
    ).toMatchObject([{ code: "vacuum_behind", lastVacuum: null }]);
  });

  it("connections: a warning from 80 %, an error from 95 %", () => {
    expect(connectionFindings({ ...server, connections: 77 })).toEqual([]);
    expect(connectionFindings({ ...server, connections: 78 })).toMatchObject([
      { severity: "warning", code: "connections_near_limit", connections: 78, maxConnections: 97 },
    ]);
    expect(connectionFindings({ ...server, connections: 93 })).toMatchObject([{ severity: "error" }]);
  });

  it("errors first; ok only without errors", () => {
    const report = diagnose({
      ...clean,
      subscriptions: [subscription({ dead: 1 })],
      horizons: [session({})],
    });
    expect(report.ok).toBe(false);
    expect(report.findings.map((f) => [f.severity, f.code])).toEqual([
      ["error", "horizon_held"],
      ["warning", "dead_keys"],
    ]);
    expect(diagnose({ ...clean, subscriptions: [subscription({ dead: 1 })] }).ok).toBe(true);
  });

  it("durations for people", () => {
    expect(
      [0, 999, 1000, 59_999, 60_000, 185_000, 3_600_000, 3_660_000, 90_000_000, 86_400_000].map(formatDuration),
    ).toEqual(["0 ms", "999 ms", "1 s", "59 s", "1 min", "3 min 5 s", "1 h", "1 h 1 min", "1 d 1 h", "1 d"]);
    expect(formatDuration(null)).toBe("an unknown time");
  });
});
