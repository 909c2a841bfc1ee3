// Mutants of fairness between tenants, caps, rate limits (gathered by mutants.ts).
import { one, type Mutant } from "./mutant.js";

const MIGRATIONS = "src/db/migrations.ts";

export const flowControlMutants: Mutant[] = [
  // --- rate limits ------------------------------------------------------------------------
  {
    name: "flow: a bucket's room dealt by key name, not by how long the keys waited",
    edits: one(
      "src/sql/consume/rateLimits.ts",
      "row_number() OVER (ORDER BY t.replaying, t.waited_since, t.key) AS turn",
      "row_number() OVER (ORDER BY t.key) AS turn",
    ),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: a bucket's limited keys all told to come back at once (not one behind the other)",
    edits: one(
      "src/sql/consume/rateLimits.ts",
      "d.next_at + (sum(least(d.want, ${burst})) OVER (PARTITION BY d.bucket, d.share = 0 ORDER BY d.turn)\n          - least(d.want, ${burst}))",
      "d.next_at + (0)",
    ),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: a key retried after an expired lease charged a full batch (it gets one event)",
    edits: one(
      "src/sql/consume/rateLimits.ts",
      "CASE WHEN t.attempts + t.expired::int > 0 THEN 1",
      "CASE WHEN t.attempts > 0 THEN 1",
    ),
    tests: ["test/rateLimits.int.test.ts"],
  },
  // rate_take of migration 0030 (with a burst); 0022's is no longer called
  {
    name: "flow: rate_take reads a bucket of that scope in any subscription",
    edits: one(
      MIGRATIONS,
      'WHERE b.subscription_id = \\"sub_id\\" AND b.scope = \\"bucket\\" FOR UPDATE;\\n  now_at := clock_timestamp();\\n  base := greatest(due, now_at);\\n  -- spacing',
      'WHERE b.scope = \\"bucket\\" FOR UPDATE;\\n  now_at := clock_timestamp();\\n  base := greatest(due, now_at);\\n  -- spacing',
    ),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: rate_take has no burst (one event's room at a time)",
    edits: one(MIGRATIONS, 'room := floor((\\"burst\\"::float8 * ', "room := floor((1::float8 * "),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: rate_take's tolerance a whole perMs again (0022: an idle bucket lets every event start at once)",
    edits: one(MIGRATIONS, 'room := floor((\\"burst\\"::float8 * ', 'room := floor((\\"limit_events\\"::float8 * '),
    tests: ["test/rateLimits.int.test.ts", "test/worker/rateLimit.worker.test.ts"],
  },
  {
    name: "flow: rate_take says a bucket has room one event too early",
    edits: one(MIGRATIONS, '(\\"granted\\" - \\"burst\\" + 1) * step_ms', '(\\"granted\\" - \\"burst\\") * step_ms'),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: rate_take with a burst has no window (a window sees events + burst - 1)",
    edits: one(MIGRATIONS, 'room := least(room, \\"limit_events\\" - in_window);', "room := room;"),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: rate_take says a full window has room (keys told to come back before it does)",
    edits: one(MIGRATIONS, "coalesce(window_next, now_at));", "now_at);"),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: the previous release's 5-argument rate_take keeps its whole-perMs burst",
    edits: one(MIGRATIONS, '\\"limit_ms\\", 1, \\"wanted\\")', '\\"limit_ms\\", \\"limit_events\\", \\"wanted\\")'),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: the claim takes a burst of 1 whatever the subscription says",
    edits: one("src/sql/consume/rateLimits.ts", "coalesce((rate_limit ->> 'burst')::int, 1)", "1"),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: a bucket's limited keys spaced by the batches they want, not the burst's room they get",
    edits: one("src/sql/consume/rateLimits.ts", "sum(least(d.want, ${burst}))", "sum(d.want)"),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: a burst above the limit's events accepted",
    edits: one("src/config.ts", ".refine((r) => r.burst <= r.events,", ".refine((r) => r.burst > 0,"),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: stats show a limit the previous release stored (no burst) as it is",
    edits: one(
      "src/sql/inspect/subscriptionStats.ts",
      "rateLimit: row.rate_limit && { ...row.rate_limit, burst: row.rate_limit.burst ?? 1 },",
      'rateLimit: row.rate_limit as SubscriptionStats["rateLimit"],',
    ),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: the dashboard's rate-limit figure leaves out the burst",
    edits: one("src/http/dashboard/keys.tsx", '{s.rateLimit.burst > 1 ? `, burst ${num(s.rateLimit.burst)}` : ""}', ""),
    tests: ["test/worker/dashboard.worker.test.ts"],
  },
  {
    name: "flow: an idle tenant pruned whenever its keys have no work (its rate bucket with it: the limit starts over)",
    edits: one(
      "src/sql/housekeeping/pruneOperational.ts",
      "AND coalesce(n.served_at, '-infinity') <= now() - ${tenantIdleMs} * interval '1 millisecond'",
      "AND coalesce(n.served_at, '-infinity') <= now()",
    ),
    tests: ["test/rateLimits.int.test.ts"],
  },
  // --- maxLeasedKeys ------------------------------------------------------------------------
  {
    name: "flow: maxLeasedKeys counts keys in backoff as in flight (a failing key holds a slot)",
    edits: one(
      MIGRATIONS,
      "IS FALSE\\n       AND k.available_at > clock_timestamp() AND k.paused_at IS NULL AND k.lease_until > clock_timestamp()",
      "IS FALSE\\n       AND k.available_at > clock_timestamp() AND k.paused_at IS NULL",
    ),
    tests: ["test/leasedKeysCap.int.test.ts"],
  },
  {
    name: "flow: maxLeasedKeys does not count replaying keys' leases (a rewind runs past the cap)",
    edits: one(
      MIGRATIONS,
      '\\n    UNION ALL\\n    (SELECT 1 FROM \\"corq\\".\\"keys\\" k WHERE k.subscription_id = \\"subscription\\" AND (k.last_seq < k.replay_seq) IS TRUE\\n       AND k.available_at > clock_timestamp() AND k.paused_at IS NULL AND k.lease_until > clock_timestamp()\\n     ORDER BY k.available_at LIMIT \\"cap\\")',
      "",
    ),
    tests: ["test/leasedKeysCap.int.test.ts"],
  },
  {
    name: "flow: maxLeasedKeys does not count a key paused while its batch runs",
    edits: one(
      MIGRATIONS,
      'k.subscription_id = \\"subscription\\" AND k.paused_at IS NOT NULL\\n       AND k.lease_until > clock_timestamp() LIMIT \\"cap\\")',
      'k.subscription_id = \\"subscription\\" AND k.paused_at IS NOT NULL\\n       AND false LIMIT \\"cap\\")',
    ),
    tests: ["test/leasedKeysCap.int.test.ts"],
  },
  {
    name: "flow: maxLeasedKeys leases one key less than its room",
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "WHERE p.dies OR p.turn <= coalesce((SELECT n FROM room), 0)",
      "WHERE p.dies OR p.turn < coalesce((SELECT n FROM room), 0)",
    ),
    tests: ["test/leasedKeysCap.int.test.ts"],
  },
  // --- maxLeasedKeysPerTenant ---------------------------------------------------------------
  {
    name: "flow: a tenant's cap counts every tenant's leases (it caps the subscription)",
    edits: one(
      MIGRATIONS,
      'k.subscription_id = \\"sub_id\\" AND k.tenant = \\"t\\"\\n',
      'k.subscription_id = \\"sub_id\\"\\n',
    ),
    tests: ["test/tenantCap.int.test.ts"],
  },
  {
    name: "flow: a tenant's cap does not count its key paused while its batch runs",
    edits: one(
      MIGRATIONS,
      'AND k.tenant = \\"t\\" AND k.lease_until > clock_timestamp() LIMIT \\"cap\\")',
      'AND k.tenant = \\"t\\" AND false LIMIT \\"cap\\")',
    ),
    tests: ["test/tenantCap.int.test.ts"],
  },
];
