// Static check: where a statement's result depends on row order, the order is written down.
// Postgres gives no order without ORDER BY; the plans it usually picks walk a primary key, so
// a missing ORDER BY passes every test that runs the statement (test/forcedPlans.int.test.ts
// forces other plans where one can reorder). Every builder in src/sql is rendered with sample
// arguments and its SQL text is checked:
//   LIMIT             has an ORDER BY at the same query level (which rows are kept);
//   INSERT … SELECT   has an ORDER BY (identity positions and row-lock order follow it);
//   json_agg, jsonb_agg, array_agg, string_agg, ARRAY(SELECT …)  order their elements.
// Known exceptions are listed with the reason order does not matter there; an exception that
// no longer matches anything fails the test too, so the list stays honest.
import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { sql, SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { present } from "./helpers/present.js";

const dialect = new PgDialect();
const lease = { subscriptionId: 1, key: "k", token: "00000000-0000-0000-0000-000000000000" };
const through = { tx: "10", position: 5, seq: 3 };
const at = new Date(0);
const settings = {
  name: "s",
  events: ["*"],
  streams: null,
  key: "stream",
  from: "beginning" as const,
  batchSize: 10,
  maxAttempts: 3,
  leaseMs: 30_000,
  backoff: { initialMs: 1000, maxMs: 60_000, factor: 2 },
};
const batchRecord = {
  subscriptionId: 1,
  key: "k",
  startedAt: at,
  finishedAt: at,
  events: 1,
  outcome: "acked" as const,
};
const event = { name: "E", data: {} };
const settlements = [
  { key: "a", token: lease.token, claimedAt: at, count: 2, outcome: { through } },
  { key: "b", token: lease.token, claimedAt: at, count: 1, outcome: { error: "Error: x", headPosition: 5 } },
];

/** Sample calls of every export of src/sql that builds SQL: each variant its builder can produce. */
const samples: Record<string, (fn: (...args: any[]) => SQL) => SQL[]> = {
  ackBatch: (f) => [f(lease, { through, count: 2, claimedAt: at })],
  ackInTransaction: (f) => [f(lease, { through, count: 2 })],
  fencedKey: (f) => [f(lease)],
  ackCtes: (f) => [f(lease, through, 2)],
  recentBatches: (f) => [f(undefined, 1000, 10), f("s", 1000, 10)],
  countAcked: (f) => [f(sql`acked`, sql`now()`, sql`1`)],
  ackedPerBucket: (f) => [f(60_000, 10_000)],
  recordBatches: (f) => [f([batchRecord])],
  pruneActivity: (f) => [f(1000)],
  pruneActivityCtes: (f) => [f(1000)],
  pruneOperational: (f) => [f({ activityOlderThanMs: 1000 })],
  logTail: (f) => [f(10), f(10, 500)],
  timelineBatches: (f) => [
    f({ sinceMs: 60_000, maxKeys: 40, slotMs: 200, limit: 100 }),
    f({ subscription: "s", sinceMs: 60_000, maxKeys: 40, slotMs: 200, limit: 100 }),
  ],
  batchCounts: (f) => [f(undefined, 60_000), f("s", 60_000)],
  readAdvanceBatch: (f) => [
    f(1, { names: ["*"], streams: null, limit: 100 }),
    f(1, { names: ["A", "B"], streams: ["a-", "b-"], limit: 100 }),
  ],
  writeAdvanceBatch: (f) => [
    f(1, {
      read: { ...through, eraseEpoch: 0 },
      last: through,
      matched: [{ tx: "10", position: 5, key: "k", invalid: null }],
    }),
  ],
  advanceSubscription: (f) => [f(1, 100)],
  enqueueAndMove: (f) => [f(sql`1`, { tx: sql`'1'::xid8`, position: sql`1` }, sql`true`)],
  recordAdvanceError: (f) => [f(1, "Error: x")],
  // cells (src/sql/cells/)
  listSlots: (f) => [f()],
  countSlots: (f) => [f()],
  listMoves: (f) => [f()],
  raiseWatermarks: (f) => [f()],
  holdSlots: (f) => [f([{ slot: 1, epoch: 1 }])],
  fenceSlot: (f) => [f(1, 1)],
  unfenceSlot: (f) => [f(1, 1)],
  dropSlot: (f) => [f(1, 1)],
  holdsSlot: (f) => [f(1, 1)],
  assignSlots: (f) => [f([{ slot: 0, cell: "a", epoch: 1 }])],
  readMove: (f) => [f(1)],
  beginMove: (f) => [f(1, "a", "b", 1)],
  setPhase: (f) => [f(1, "copying", { tx: "10", position: 5, copied: 2 }), f(1, "draining")],
  switchSlot: (f) => [f(1, "b", 1)],
  endMove: (f) => [f(1)],
  streamNames: (f) => [f("", 100)],
  slotBacklog: (f) => [f(["t:1"])],
  eventsToCopy: (f) => [f(["t:1"], null, 100), f(["t:1"], { tx: "10", position: 5 }, 100)],
  insertCopies: (f) => [f([])],
  streamsToCopy: (f) => [f(["t:1"])],
  insertStreams: (f) => [f([])],
  idempotencyToCopy: (f) => [f(["t:1"])],
  insertIdempotency: (f) => [f([])],
  seqsToCarry: (f) => [f(["t:1"])],
  carrySeqs: (f) => [f([])],
  deleteMovedEvents: (f) => [f(["t:1"], 100)],
  deleteMovedStreams: (f) => [f(["t:1"])],
  deleteCopies: (f) => [f(["t:1"], 100)],
  appendEvents: (f) => [
    f("s", [event, event]),
    f("s", [event], { expectedVersion: -1 }),
    f("s", [event], { expectedVersion: 3 }),
    f("s", [event], { notify: true }),
  ],
  streamHead: (f) => [f("s")],
  claimBatch: (f) => [
    f("s"),
    f("s", { kind: "push", holder: "h" }),
    f("s", { limit: 8 }),
    f("s", { limit: 8, plain: true }),
    f("s", { limit: 8, fairOnly: true }),
  ],
  settleAndClaim: (f) => [
    f("s", { limit: 8 }, { subscriptionId: 1, settlements }),
    f("s", { limit: 8, plain: true }, { subscriptionId: 1, settlements }),
    f("s", { kind: "push", limit: 0, holder: "h" }, { subscriptionId: 1, settlements }),
    f("s", { limit: 8, plain: true }, { subscriptionId: 1, settlements: settlements.slice(0, 1) }),
    f("s", { limit: 8, fairOnly: true }, { subscriptionId: 1, settlements }),
  ],
  settleCtes: (f) => [f(1, settlements), f(1, settlements.slice(0, 1))],
  pickFair: (f) => [f(16, sql`k.key`, sql``)],
  literalLimit: (f) => [f(16)],
  atMost: (f) => [f(16, sql`SELECT key FROM corq.keys ORDER BY key LIMIT 16 - (SELECT 0)`)],
  pickUntenanted: (f) => [f(16, sql`k.key`, sql``)],
  rateLimited: (f) => [f()],
  failBatch: (f) => [f(lease, { error: "Error: x", headPosition: 5, count: 2, claimedAt: at })],
  listDeadLetters: (f) => [f(undefined, 10), f("s", 10, true)],
  listKeys: (f) => [
    f("s", { limit: 10 }),
    f("s", { status: "dead", after: "a", limit: 10 }),
    f("s", { status: "paused", limit: 10 }),
    f("s", { only: "k", limit: 1 }),
  ],
  pauseKey: (f) => [f("s", "k")],
  resumeKey: (f) => [f("s", "k")],
  keyProblem: (f) => [f(sql`'k'`)],
  valueAt: (f) => [f(sql`sub.tenant`)],
  storedTenant: (f) => [f(sql`sub.tenant`, sql`'t'`)],
  streamTaken: (f) => [f(sql`e.stream`, sql`s.streams`)],
  beginRewind: (f) => [
    f({ subscription: "s", to: "beginning", key: undefined, token: lease.token, leaseMs: 1000, functionKey: false }),
    f({ subscription: "s", to: 5, key: "k", token: lease.token, leaseMs: 1000, functionKey: true }),
  ],
  takeOverRewind: (f) => [f({ subscriptionId: 1, token: lease.token, leaseMs: 1000, functionKey: false })],
  finishRewind: (f) => [f(1, lease.token)],
  leaseEnd: (f) => [f(1000)],
  stageChunk: (f) => [
    f({ subscriptionId: 1, token: lease.token, limit: 10, leaseMs: 1000 }),
    f({ subscriptionId: 1, token: lease.token, limit: 10, leaseMs: 1000, oneStream: "k" }),
  ],
  analyzeStaged: (f) => [f()],
  readStageChunk: (f) => [f({ subscriptionId: 1, token: lease.token, limit: 10 })],
  writeStageChunk: (f) => [
    f({ subscriptionId: 1, token: lease.token, leaseMs: 1000, last: null, keyed: [], done: true }),
    f({
      subscriptionId: 1,
      token: lease.token,
      leaseMs: 1000,
      last: through,
      keyed: [{ ...through, key: "k" }],
      done: false,
    }),
  ],
  requeueChunk: (f) => [
    f({ subscriptionId: 1, token: lease.token, limit: 10, leaseMs: 1000, after: null }),
    f({ subscriptionId: 1, token: lease.token, limit: 10, leaseMs: 1000, after: { ...through, key: "k" } }),
  ],
  rewindState: (f) => [f(sql`s`)],
  putSubscription: (f) => [
    f(settings, { url: "https://x.example", timeoutMs: 1000 }, { generated: "whsec_x" }),
    f({ ...settings, streams: ["a-", "b-"] }, { url: "https://x.example", timeoutMs: 1000 }, { generated: "whsec_x" }),
  ],
  deleteSubscription: (f) => [f("s", "keep"), f("s", "delete")],
  deleteSubscriptionRows: (f) => [f(1)],
  readLog: (f) => [f(0, 10), f(5, 10)],
  eventExists: (f) => [f(5)],
  readStream: (f) => [f("s", 0, 10)],
  beginErasure: (f) => [f("s")],
  holdAdvancers: (f) => [f()],
  eraseRound: (f) => [f("s", 2000)],
  afterRound: (f) => [f([1, 2])],
  readyKeys: (f) => [f(8)],
  releaseDeadKeys: (f) => [
    f("s", undefined, "retry"),
    f("s", "k", "retry"),
    f("s", undefined, "skip"),
    f("s", "k", "skip"),
  ],
  releaseLease: (f) => [f(lease)],
  setPaused: (f) => [f("s", true)],
  subscriptionStats: (f) => [f(), f("s")],
  logHead: (f) => [f()],
  syncSubscriptions: (f) => [
    f([settings], { kick: false }),
    f([settings], { kick: {} }),
    f([settings], { kick: { names: ["A"] } }),
  ],
  kicksPending: (f) => [f([1, 2])],
  waitForAdvancer: (f) => [f(1)],
  claimConsumerSlots: (f) => [f({ max: 8, want: 3, holdMs: 10_000, codeSubscriptions: ["a", "b"] })],
  releaseConsumerSlot: (f) => [f(1)],
  rememberWebhookId: (f) => [f("msg_1")],
  startDashboardSession: (f) => [f("session-id", 3_600_000, null), f("session-id", 3_600_000, lease.token)],
  dashboardSession: (f) => [f("session-id")],
  endDashboardSession: (f) => [f("session-id")],
  insertToken: (f) => [f({ name: "t", scopes: ["append", "read"], streamPrefix: "orders-", hash: "ab" })],
  listTokens: (f) => [f()],
  deleteToken: (f) => [f(lease.token)],
  verifyToken: (f) => [f("ab")],
  listBatchDurations: (f) => [f()],
  eventsAboveHorizon: (f) => [f()],
  horizonPassed: (f) => [f("123")],
  nextDue: (f) => [f([]), f(["a", "b"]), f(["a"], { recentMs: 250 })],
  heldUntil: (f) => [f({ subscriptionId: sql`1`, key: sql`'k'`, after: sql`0`, at: sql`now()` })],
  firstHeldSeq: (f) => [f({ subscriptionId: sql`1`, key: sql`'k'`, after: sql`0`, at: sql`now()` })],
  cappedDeliverAt: (f) => [f(sql`e`, sql`86400000`)],
  tenantTurnsEarlier: (f) => [f(sql`(SELECT 1 AS subscription_id, 't' AS tenant, now() AS available_at)`)],
  roomFreed: (f) => [f(sql`(SELECT 1 AS subscription_id, 't' AS tenant)`)],
  leasedKeysUpTo: (f) => [f(sql`1`, sql`5`)],
  keysInFlight: (f) => [f("s")],
  deadKeysSince: (f) => [f([{ id: 1, since: at.toISOString(), minIntervalMs: 1000 }], 10)],
  subscriptionConditions: (f) => [f(0), f(1001)],
  subscriptionLag: (f) => [f(["a", "b"])],
  recordAlerts: (f) => [
    f(
      [
        {
          alertId: 1,
          type: "key.dead",
          subject: '["s","k"]',
          incident: "1",
          payload: { type: "key.dead", subscription: "s", key: "k", at: at.toISOString() },
        },
      ],
      [{ alertId: 1, back: at.toISOString() }],
    ),
  ],
  claimAlertSends: (f) => [f(8, 10_000)],
  settleAlertSends: (f) => [
    f([
      { alertId: 1, type: "key.dead", subject: "s", messageId: "msg_1", error: null },
      { alertId: 1, type: "subscription.lag", subject: "s", messageId: "msg_2", error: "HTTP 500" },
    ]),
  ],
  startAlertPass: (f) => [f()],
  putAlert: (f) => [
    f(
      "a",
      {
        url: "https://x.example/",
        secret: undefined,
        conditions: ["key.dead"],
        lagOver: null,
        heldOverMs: null,
        minIntervalMs: 1000,
      },
      { generated: "whsec_x" },
    ),
  ],
  listAlerts: (f) => [f()],
  deleteAlert: (f) => [f("a")],
  heldHorizons: (f) => [f(60_000), f(60_000, { query: false })],
  appliedMigrations: (f) => [f()],
  subscriptionHealth: (f) => [f()],
  tableVacuum: (f) => [f()],
  serverState: (f) => [f()],
  notifyWake: (f) => [f("append"), f("append", "ready")],
  notifyProbe: (f) => [f("4b6f0e8a-1d2c-4e5f-8a9b-0c1d2e3f4a5b"), f("another")],
  logCounters: (f) => [f()],
  listSubscriptionCounters: (f) => [f()],
  listAlertCounters: (f) => [f()],
  compactIdleKeys: (f) => [f({ idleMs: 1000, limit: 10 })],
  readRetention: (f) => [f(undefined), f({ maxAgeMs: 1000, streams: ["a-"] })],
  writeRetention: (f) => [
    f({ maxAgeMs: 1000, streams: null }, undefined),
    f({ maxAgeMs: null, streams: ["a-"] }, { maxAgeMs: 1, streams: null }),
  ],
  lockPolicy: (f) => [f()],
  lockSubscriptions: (f) => [f()],
  requeuedRemoved: (f) => [f([1, 2, 3], { tx: "5", position: 3 })],
  chunkSettings: (f) => [f(300)],
  removeChunk: (f) => [f({ sweep: 2000, recheck: 2000 }), f({ sweep: 2000, recheck: 0 })],
  rewindBelowHorizon: (f) => [f(10)],
  seqFloor: (f) => [f(1)],
  unadvancedUpTo: (f) => [f(10_001)],
};

/** Exports of src/sql that are not SQL builders. */
const notBuilders: Record<string, string> = {
  toStoredEvent: "decodes a row",
  toSubscriptionStats: "decodes a row",
  lagOf: "decodes a row (the lag, counted or estimated)",
  logCount: "decodes a row (the log's size, counted or estimated)",
  toKeyState: "decodes a row",
  toAlertInfo: "decodes a row",
  toDeadLetter: "decodes a row",
  toBatchRecord: "decodes a row",
  toTokenInfo: "decodes a row",
  toRetention: "decodes a row",
};

type Rule = "LIMIT" | "INSERT … SELECT" | "ordered aggregate";

/**
 * Places where order does not matter, with the reason: a finding of `rule` whose SQL contains
 * `match` (in every builder that uses it: fragments are rendered inside their statements).
 */
const exceptions: { rule: Rule; match: string; reason: string }[] = [
  {
    rule: "LIMIT",
    match: ") bounded LIMIT",
    reason:
      "atMost's constant LIMIT over a walk that orders itself (its ORDER BY is inside): a bound of the estimate, at least the inner LIMIT",
  },
  {
    rule: "LIMIT",
    match: `SELECT 1 FROM "corq"."queue" q WHERE q.position = c.position LIMIT 1`,
    reason: "retention's probe: whether any queue row references the event",
  },
  {
    rule: "LIMIT",
    match: "-- one row (the primary key)",
    reason: "an erasure round's lock of one key row by its primary key: at most one row",
  },
  {
    rule: "LIMIT",
    match: `SELECT k.pending FROM "corq"."keys"`,
    reason:
      "the alerts' lag test sums the pending events of queued keys, up to a cap, only to see whether it passes lagOver; the payload's figure is counted whole",
  },
  {
    rule: "LIMIT",
    match: `SELECT 1 FROM "corq"."keys"`,
    reason: "readyKeys and claimConsumerSlots count ready / leased keys up to a cap: which ones is irrelevant",
  },
  {
    rule: "LIMIT",
    match: "FOR UPDATE OF k SKIP LOCKED",
    reason:
      "compactIdleKeys deletes any idle keys past the threshold, a chunk at a time: which go first is irrelevant, and an ORDER BY across subscriptions would sort every candidate",
  },
  {
    rule: "INSERT … SELECT",
    match: `INSERT INTO "corq"."activity"`,
    reason: "telemetry rows (one per batch), read ORDER BY finished_at",
  },
  {
    rule: "INSERT … SELECT",
    match: `INSERT INTO "corq"."subscriptions"`,
    reason: "syncSubscriptions: subscriptions are found by name; new names take no lock another writer waits on",
  },
  {
    rule: "INSERT … SELECT",
    match: `INSERT INTO "corq"."streams"`,
    reason: "appendEvents inserts one stream row, FROM the one row of its advisory lock",
  },
  {
    rule: "INSERT … SELECT",
    match: `INSERT INTO "corq"."dashboard_sessions"`,
    reason: "startDashboardSession inserts one row (a SELECT without FROM), only if its token still exists",
  },
  {
    rule: "INSERT … SELECT",
    match: "INSERT INTO corq_directory.moves",
    reason: "beginMove inserts one row (a SELECT without FROM), only if the slot is where the caller read it",
  },
  {
    rule: "ordered aggregate",
    match: "ARRAY(SELECT jsonb_array_elements_text",
    reason: "syncSubscriptions: the events filter is a set of names (jsonb_array_elements keeps array order anyway)",
  },
];

interface Finding {
  builder: string;
  rule: Rule;
  text: string;
}

/** The SQL with string literals and comments blanked out (same length), and each character's paren depth. */
function scan(text: string): { code: string; depth: number[] } {
  let code = text.replace(/'(?:[^']|'')*'/g, (s) => `'${" ".repeat(s.length - 2)}'`);
  code = code.replace(/--[^\n]*/g, (s) => " ".repeat(s.length));
  const depth: number[] = [];
  let d = 0;
  for (const c of code) {
    if (c === ")") d--;
    depth.push(d);
    if (c === "(") d++;
  }
  return { code, depth };
}

/** The range of the query level that contains index `i`: from its opening paren (or the start) to its closing one (or the end). */
function level(code: string, depth: number[], i: number): [number, number] {
  const outer = present(depth[i], `the paren depth at ${i}`) - 1;
  let start = i;
  while (start > 0 && !(depth[start - 1] === outer && code[start - 1] === "(")) start--;
  let end = i;
  while (end < code.length && !(code[end] === ")" && depth[end] === outer)) end++;
  return [start, end];
}

/** Whether `pattern` occurs in code[from, to) at paren depth `d`. */
function atDepth(code: string, depth: number[], pattern: RegExp, from: number, to: number, d: number): number {
  const re = new RegExp(pattern.source, "gi");
  re.lastIndex = from;
  for (let m = re.exec(code); m && m.index < to; m = re.exec(code)) if (depth[m.index] === d) return m.index;
  return -1;
}

const ORDER_BY = /\bORDER\s+BY\b/;
const snippet = (text: string, from: number, to: number) => text.slice(from, to).replace(/\s+/g, " ").trim();

function check(builder: string, text: string): Finding[] {
  const { code, depth } = scan(text);
  const depthAt = (i: number) => present(depth[i], `the paren depth at ${i}`);
  const findings: Finding[] = [];
  for (const m of code.matchAll(/\bLIMIT\b/gi)) {
    const [start, end] = level(code, depth, m.index);
    if (atDepth(code, depth, ORDER_BY, start, m.index, depthAt(m.index)) === -1) {
      findings.push({ builder, rule: "LIMIT", text: snippet(text, start, end) });
    }
  }
  for (const m of code.matchAll(/\bINSERT\s+INTO\b/gi)) {
    const d = depthAt(m.index);
    const [, end] = level(code, depth, m.index);
    const select = atDepth(code, depth, /\b(SELECT|VALUES)\b/, m.index, end, d);
    if (select === -1 || /^VALUES/i.test(code.slice(select))) continue;
    const tail = atDepth(code, depth, /\b(ON\s+CONFLICT|RETURNING)\b/, select, end, d);
    if (atDepth(code, depth, ORDER_BY, select, tail === -1 ? end : tail, d) === -1) {
      findings.push({ builder, rule: "INSERT … SELECT", text: snippet(text, m.index, end) });
    }
  }
  for (const m of code.matchAll(/\b(json_agg|jsonb_agg|array_agg|string_agg|ARRAY)\s*\(/gi)) {
    const open = m.index + m[0].length - 1;
    if (present(m[1], "the aggregate's name").toUpperCase() === "ARRAY" && !/^\(\s*SELECT\b/i.test(code.slice(open)))
      continue;
    const [start, end] = level(code, depth, open + 1);
    if (atDepth(code, depth, ORDER_BY, start, end, depthAt(open) + 1) === -1) {
      findings.push({ builder, rule: "ordered aggregate", text: snippet(text, m.index, end + 1) });
    }
  }
  return findings;
}

async function renderAll(): Promise<{ builder: string; text: string }[]> {
  const dir = new URL("../src/sql/", import.meta.url);
  const rendered: { builder: string; text: string }[] = [];
  const unknown: string[] = [];
  // src/sql is in folders by pipeline stage (log/, advance/, consume/, …): walk them all.
  const files = readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts"))
    .sort();
  expect(files.length, "no SQL modules found under src/sql").toBeGreaterThan(20);
  for (const file of files) {
    const module: Record<string, unknown> = await import(new URL(file, dir).href);
    for (const [name, value] of Object.entries(module)) {
      if (value instanceof SQL) rendered.push({ builder: name, text: dialect.sqlToQuery(value).sql });
      else if (typeof value === "function" && samples[name]) {
        for (const query of samples[name](value as (...args: any[]) => SQL))
          rendered.push({ builder: name, text: dialect.sqlToQuery(query).sql });
      } else if (typeof value === "function" && !notBuilders[name]) unknown.push(`${file}: ${name}`);
    }
  }
  expect(
    unknown,
    "exports of src/sql without sample arguments here: add them to `samples` so their SQL is checked",
  ).toEqual([]);
  return rendered;
}

describe("order in the SQL of src/sql", () => {
  it("every LIMIT, INSERT … SELECT and list aggregate whose result depends on order has an ORDER BY", async () => {
    const rendered = await renderAll();
    const builders = new Set(rendered.map((r) => r.builder));
    expect(
      Object.keys(samples).filter((name) => !builders.has(name)),
      "samples for builders that no longer exist",
    ).toEqual([]);
    const findings = rendered.flatMap((r) => check(r.builder, r.text));
    const excused = (f: Finding) => exceptions.some((e) => e.rule === f.rule && f.text.includes(e.match));
    expect(
      findings.filter((f) => !excused(f)),
      "order left to the plan",
    ).toEqual([]);
    const unused = exceptions.filter((e) => !findings.some((f) => e.rule === f.rule && f.text.includes(e.match)));
    expect(unused, "exceptions that no longer match anything: remove them").toEqual([]);
  });

  it("the check itself finds what it is meant to find", () => {
    const rules = (text: string) => check("t", text).map((f) => f.rule);
    expect(rules("SELECT a FROM t LIMIT 5")).toEqual(["LIMIT"]);
    expect(rules("SELECT a FROM t ORDER BY a LIMIT 5")).toEqual([]);
    // an ORDER BY elsewhere (an inner query, another CTE, a string) does not count
    expect(rules("SELECT a FROM (SELECT a FROM t ORDER BY a) x LIMIT 5")).toEqual(["LIMIT"]);
    expect(rules("WITH x AS (SELECT 1 ORDER BY 1), y AS (SELECT a FROM t LIMIT 1) SELECT 1")).toEqual(["LIMIT"]);
    expect(rules("SELECT 'ORDER BY' FROM t LIMIT 1")).toEqual(["LIMIT"]);
    expect(rules("SELECT a FROM t, LATERAL (SELECT b FROM u WHERE u.a = t.a ORDER BY b LIMIT (SELECT 2)) q")).toEqual(
      [],
    );
    expect(rules("WITH i AS (INSERT INTO t (a) SELECT a FROM u RETURNING a) SELECT 1")).toEqual(["INSERT … SELECT"]);
    expect(rules("INSERT INTO t (a) SELECT a FROM u ORDER BY a ON CONFLICT (a) DO NOTHING")).toEqual([]);
    expect(rules("INSERT INTO t (a) VALUES (1) ON CONFLICT (a) DO NOTHING")).toEqual([]);
    expect(rules("SELECT json_agg(a), json_agg(b ORDER BY b), ARRAY(SELECT a FROM t) FROM t")).toEqual([
      "ordered aggregate",
      "ordered aggregate",
    ]);
  });
});
