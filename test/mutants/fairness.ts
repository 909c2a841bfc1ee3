// Mutants of the fair pick's bounded walk of tenants and their turns (gathered by mutants.ts).
import { one, type Mutant } from "./mutant.js";

export const fairnessMutants: Mutant[] = [
  {
    name: "fairness: the walk of tenants unbounded (every tenant whose turn came, each claim)",
    edits: one("src/sql/consume/fairPick.ts", "      LIMIT ${TENANTS_PER_CLAIM}\n", "\n"),
    tests: ["test/fairWalk.int.test.ts"],
  },
  {
    name: "fairness: tenants whose keys only wait visited (the turn not read)",
    edits: one(
      "src/sql/consume/fairPick.ts",
      "WHERE t.subscription_id = (SELECT id FROM sub) AND t.due_at <= now()",
      "WHERE t.subscription_id = (SELECT id FROM sub)",
    ),
    tests: ["test/fairWalk.int.test.ts"],
  },
  {
    name: "fairness: a tenant reached with nothing ready keeps its turn (visited by every claim)",
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "ELSE corq.tenant_next_turn(t.subscription_id, t.tenant, (SELECT lease_ms FROM sub),\n                                    (SELECT max_leased_keys_per_tenant FROM sub)) END,",
      "ELSE t.due_at END,",
    ),
    tests: ["test/fairWalk.int.test.ts"],
  },
  {
    name: "fairness: a tenant with a leased key sent to its lease's end (an early ack then waits out the lease)",
    edits: one(
      "src/db/migrations.ts",
      "IF earliest > clock_timestamp() + \\\"lease_ms\\\" * interval '1 millisecond' THEN",
      "IF earliest > clock_timestamp() THEN",
    ),
    tests: ["test/fairWalk.int.test.ts"],
  },
  {
    name: "fairness: the advance leaves a waiting tenant's turn late (its new key never visited)",
    edits: one(
      "src/sql/common/tenantTurns.ts",
      "WHERE t.due_at IS NULL OR t.due_at > excluded.due_at",
      "WHERE t.due_at IS NULL",
    ),
    tests: ["test/fairWalk.int.test.ts"],
  },
  {
    name: "fairness: a retried dead key's tenant not given its turn",
    edits: one(
      "src/sql/operate/releaseDeadKeys.ts",
      "turns AS (${tenantTurnsEarlier(sql`retried`)})",
      "turns AS (SELECT 1)",
    ),
    tests: ["test/fairWalk.int.test.ts"],
  },
  {
    name: "fairness: a resumed key's tenant not given its turn",
    edits: one("src/sql/operate/pauseKey.ts", "turns AS (${tenantTurnsEarlier(sql`resumed`)})", "turns AS (SELECT 1)"),
    tests: ["test/fairWalk.int.test.ts"],
  },
  {
    name: "fairness: tenants past where the pick stopped marked as visited (their turns pushed out unseen)",
    edits: one(
      "src/sql/consume/claimBatch.ts",
      "WHERE (SELECT count(*) FROM pick_fair) < ${limit}\n                 OR o.turn",
      "WHERE true\n                 OR o.turn",
    ),
    tests: ["test/fairWalk.int.test.ts"],
  },
  {
    name: "fairness: a tenant at its cap kept due (capped tenants fill every claim's walk)",
    edits: one(
      "src/db/migrations.ts",
      '    IF leased >= \\"cap\\" THEN\\n      RETURN lease_end;',
      "    IF false THEN\\n      RETURN lease_end;",
    ),
    tests: ["test/fairWalk.int.test.ts"],
  },
  {
    name: "fairness: an ack under a cap per tenant gives its tenant no turn (it waits out a lease end)",
    edits: one(
      "src/sql/consume/ackBatch.ts",
      "    acked_room AS (${roomFreed(sql`acked`)})",
      "    acked_room AS (SELECT 1)",
    ),
    tests: ["test/fairWalk.int.test.ts"],
  },
  {
    name: "fairness: a release under a cap per tenant gives its tenant no turn",
    edits: one(
      "src/sql/consume/releaseLease.ts",
      "released_room AS (${roomFreed(sql`released`)})",
      "released_room AS (SELECT 1)",
    ),
    tests: ["test/fairWalk.int.test.ts"],
  },
  {
    name: "fairness: a drain's settle under a cap per tenant gives its tenants no turn",
    edits: one(
      "src/sql/consume/settleKeys.ts",
      "return sql`settled_room AS (${roomFreed(rows)} RETURNING t.tenant)`;",
      "return sql`settled_room AS (SELECT NULL::text AS tenant WHERE false)`;",
    ),
    tests: ["test/tenantCap.int.test.ts", "test/fairWalk.int.test.ts"],
  },
];
