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
      "d.next_at + (sum(d.want) OVER (PARTITION BY d.bucket, d.share = 0 ORDER BY d.turn) - d.want)",
      "d.next_at + 0",
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
  {
    name: "flow: rate_take reads a bucket of that scope in any subscription",
    edits: one(
      MIGRATIONS,
      'WHERE b.subscription_id = \\"sub_id\\" AND b.scope = \\"bucket\\" FOR UPDATE;',
      'WHERE b.scope = \\"bucket\\" FOR UPDATE;',
    ),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: rate_take has no burst (one event's room at a time)",
    edits: one(
      MIGRATIONS,
      'room := floor((\\"limit_ms\\" - extract(epoch FROM base - now_at) * 1000) / step_ms)::integer;',
      "room := floor((step_ms - extract(epoch FROM base - now_at) * 1000) / step_ms)::integer;",
    ),
    tests: ["test/rateLimits.int.test.ts"],
  },
  {
    name: "flow: rate_take says a bucket has room one event too early",
    edits: one(
      MIGRATIONS,
      '((\\"granted\\" + 1) * step_ms - \\"limit_ms\\")',
      '(\\"granted\\" * step_ms - \\"limit_ms\\")',
    ),
    tests: ["test/rateLimits.int.test.ts"],
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
