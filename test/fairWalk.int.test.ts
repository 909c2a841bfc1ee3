// The fair pick's walk of tenants is bounded (issue 47, finding 1): a claim visits only tenants
// whose turn has come (corq.tenants.due_at), at most TENANTS_PER_CLAIM of them, so an append
// token that makes thousands of tenants whose keys only wait slows no claim. Turns: a tenant a
// claim reached with nothing ready waits for its next key's time (now, while a key of it is
// leased); whatever gives one of its keys work makes its turn come again. Caps per tenant are
// on where it matters: the fair pick is then the only part that takes tenants' keys.
import { PgDialect } from "drizzle-orm/pg-core";
import { describe, expect, it } from "vitest";
import type { HandlerContext, SubscriptionDefinition } from "../src/index.js";
import type { SQL } from "drizzle-orm";
import { ackBatch, type Lease } from "../src/sql/consume/ackBatch.js";
import { claimBatch } from "../src/sql/consume/claimBatch.js";
import { failBatch } from "../src/sql/consume/failBatch.js";
import { releaseLease } from "../src/sql/consume/releaseLease.js";
import { TENANTS_PER_CLAIM } from "../src/sql/consume/fairPick.js";
import { useCorq } from "./helpers/corq.js";
import { explain, type PlanNode } from "./helpers/plans.js";

const open = useCorq();

const fair = (handle: SubscriptionDefinition["handle"], more: Partial<SubscriptionDefinition> = {}) => ({
  name: "s",
  key: "data.k",
  tenant: "data.t",
  maxLeasedKeysPerTenant: 1,
  handle,
  ...more,
});

/** `n` tenants "w<i>", one key each, whose one event waits an hour (a delay). */
const waitingTenants = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ name: "E", data: { k: `w${i}`, t: `w${i}` }, delayMs: 3_600_000 }));

/** The pages a claim of 8 keys reads (EXPLAIN ANALYZE, rolled back), and the tables it scans whole. */
async function claimPages(raw: import("pg").Pool): Promise<{ pages: number; scannedWhole: string[] }> {
  const client = await raw.connect();
  try {
    const plan = await explain(client, claimBatch("s", { limit: 8, holder: "test" }), { analyze: true, buffers: true });
    const scannedWhole: string[] = [];
    const visit = (node: PlanNode) => {
      if (node["Node Type"] === "Seq Scan" && node["Relation Name"]) scannedWhole.push(node["Relation Name"]);
      for (const child of node.Plans ?? []) visit(child);
    };
    visit(plan);
    return { pages: (plan["Shared Hit Blocks"] ?? 0) + (plan["Shared Read Blocks"] ?? 0), scannedWhole };
  } finally {
    client.release();
  }
}

const turnOf = async (raw: import("pg").Pool, tenant: string) =>
  (
    await raw.query<{ due_at: Date | null; waits_ms: number | null }>(
      "SELECT due_at, (extract(epoch FROM due_at - now()) * 1000)::float8 AS waits_ms FROM corq.tenants WHERE tenant = $1",
      [tenant],
    )
  ).rows[0];

describe("the fair pick's walk of tenants", () => {
  it("reads as many pages with 2,000 tenants whose keys wait as with 10 (within 2×)", async () => {
    const pages: number[] = [];
    for (const waiting of [10, 2000]) {
      const { corq, raw, dispose } = await open({ subscriptions: [fair(() => undefined)] });
      await corq.append("waiting", waitingTenants(waiting));
      await corq.append(
        "ready",
        Array.from({ length: 16 }, (_, i) => ({ name: "E", data: { k: `r${i}`, t: `r${i % 4}` } })),
      );
      await corq.advance();
      await raw.query("ANALYZE corq.keys; ANALYZE corq.tenants");
      const claim = await claimPages(raw);
      pages.push(claim.pages);
      // tenants and keys by index at every size (at 1,000–3,000 tenant rows the turns' update
      // was planned as a scan of every tenant row)
      if (waiting > 1000) expect(claim.scannedWhole, `${waiting} waiting tenants`).toEqual([]);
      await dispose();
    }
    const [few, many] = pages as [number, number];
    expect(many, `pages read: ${few} with 10 waiting tenants, ${many} with 2,000`).toBeLessThanOrEqual(2 * few);
  });

  it(`visits at most ${TENANTS_PER_CLAIM} tenants per claim; the others' turns come in the next claims`, async () => {
    const { corq, raw } = await open({ subscriptions: [fair(() => undefined)] });
    const tenants = TENANTS_PER_CLAIM * 2 + 5;
    await corq.append(
      "many",
      Array.from({ length: tenants }, (_, i) => ({ name: "E", data: { k: `k${i}`, t: `t${i}` } })),
    );
    await corq.advance();
    // claims of up to 200 keys, left leased: one key of each tenant walked (a cap of 1 per
    // tenant: nothing but the fair pick takes tenants' keys)
    const taken: number[] = [];
    for (let i = 0; i < 4; i++) taken.push((await holdClaim(raw, 200)).length);
    expect(taken).toEqual([TENANTS_PER_CLAIM, TENANTS_PER_CLAIM, 5, 0]);
  });

  it("every tenant gets a turn before any gets a second, across claims (drain and consume)", async () => {
    for (const path of ["drain", "consume"] as const) {
      const handled: string[] = [];
      const { corq, dispose } = await open({
        subscriptions: [
          fair(
            (events, _ctx: HandlerContext) =>
              void handled.push(String((events[0]?.data as { t?: string } | undefined)?.t)),
            {
              maxLeasedKeysPerTenant: undefined,
            },
          ),
        ],
      });
      const tenants = TENANTS_PER_CLAIM + 8;
      // two keys per tenant, in tenant order: a tenant left unreached must keep its place in line
      await corq.append(
        "many",
        Array.from({ length: tenants * 2 }, (_, i) => ({
          name: "E",
          data: { k: `k${i}`, t: `t${String(i % tenants).padStart(2, "0")}` },
        })),
      );
      await corq.advance();
      if (path === "drain") await corq.drain("s", { keysPerClaim: 8, maxBatches: tenants });
      else for (let i = 0; i < tenants; i++) await corq.consume("s");
      expect(new Set(handled.slice(0, tenants)).size, handled.join(" ")).toBe(tenants);
      await dispose();
    }
  });

  it("tenants at their cap leave the walk until a lease ends or a settle gives them room (release, ack, failure)", async () => {
    const { corq, raw } = await open({ subscriptions: [fair(() => undefined, { leaseMs: 60_000 })] });
    const tenants = TENANTS_PER_CLAIM + 8;
    await corq.append(
      "many",
      Array.from({ length: tenants * 2 }, (_, i) => ({ name: "E", data: { k: `k${i}`, t: `t${i % tenants}` } })),
    );
    await corq.advance();
    // one key of every tenant leased (cap 1), then claims that reach them all at their cap
    const held = [...(await holdClaim(raw, 200)), ...(await holdClaim(raw, 200))];
    expect(held.length).toBe(tenants);
    expect([(await holdClaim(raw, 200)).length, (await holdClaim(raw, 200)).length]).toEqual([0, 0]);
    // their turns are their leases' ends: no claim's walk is filled with them
    const due = await raw.query("SELECT count(*)::int AS n FROM corq.tenants WHERE due_at <= now()");
    expect(due.rows[0].n).toBe(0);
    // a settle of one key of a tenant gives it room: its other key is taken by the next claim
    const [released, acked, failed] = held as [Held, Held, Held];
    await run(raw, releaseLease(released.lease));
    await run(
      raw,
      ackBatch(acked.lease, {
        through: { tx: acked.tx, position: acked.position, seq: acked.seq },
        count: 1,
        claimedAt: new Date(),
      }),
    );
    await run(
      raw,
      failBatch(failed.lease, { error: "Error: no", headPosition: failed.position, count: 1, claimedAt: new Date() }),
    );
    const next = await holdClaim(raw, 200);
    const tenantOf = (h: Held) => `t${Number(h.lease.key.slice(1)) % tenants}`;
    expect(next.map(tenantOf).sort()).toEqual([released, acked, failed].map(tenantOf).sort());
  });

  it("a tenant reached with nothing ready waits for its next key's time; one with a leased key stays in line", async () => {
    const { corq, raw } = await open({
      subscriptions: [
        fair(
          (_events, ctx: HandlerContext) => {
            if (ctx.key === "failing") throw new Error("no");
          },
          // no cap: a tenant whose leases fill its cap waits for them (the test above)
          { backoff: { initialMs: 600_000, maxMs: 600_000 }, maxLeasedKeysPerTenant: undefined },
        ),
      ],
    });
    await corq.append("a", [{ name: "E", data: { k: "failing", t: "f" } }]);
    await corq.advance();
    await corq.consume("s"); // leased, failed: its key waits 10 minutes
    await corq.append("b", [{ name: "E", data: { k: "other", t: "o" } }]);
    await corq.advance();
    await corq.consume("s"); // this claim reaches "f" (served before "o" came): nothing ready
    const waiting = await turnOf(raw, "f");
    const key = await raw.query("SELECT available_at FROM corq.keys WHERE key = 'failing'");
    expect(waiting?.due_at?.getTime()).toBe(key.rows[0].available_at.getTime());
    expect(waiting?.waits_ms).toBeGreaterThan(500_000);

    // a tenant whose one key is leased (a claim not settled yet): reached, it stays due now
    await corq.append("c", [{ name: "E", data: { k: "held", t: "h" } }]);
    await corq.advance();
    await holdClaim(raw, 1);
    await corq.consume("s");
    const held = await turnOf(raw, "h");
    expect(held?.waits_ms).toBeLessThanOrEqual(0);
  });

  const ways: { name: string; wake(corq: import("../src/index.js").Corq): Promise<unknown>; setup: string }[] = [
    {
      name: "new events for another key of it",
      setup: "failing",
      wake: async (corq) => {
        await corq.append("n", [{ name: "E", data: { k: "fresh", t: "w" } }]);
        await corq.advance();
      },
    },
    {
      name: "a retry of its dead key",
      setup: "dead",
      wake: (corq) => corq.releaseDeadLetters({ subscription: "s", key: "w1", mode: "retry" }),
    },
    { name: "a resume of its paused key", setup: "paused", wake: (corq) => corq.resumeKey("s", "w1") },
  ];
  for (const way of ways)
    it(`a tenant whose turn went out comes back with ${way.name}`, async () => {
      const handled: string[] = [];
      const { corq, raw } = await open({
        subscriptions: [
          fair(
            (_events, ctx: HandlerContext) => {
              handled.push(ctx.key);
              if (ctx.key === "w1" && way.setup !== "paused") throw new Error("no");
            },
            { backoff: { initialMs: 600_000, maxMs: 600_000 }, maxAttempts: way.setup === "dead" ? 1 : 10 },
          ),
        ],
      });
      if (way.setup === "paused") await corq.pauseKey("s", "w1");
      await corq.append("a", [{ name: "E", data: { k: "w1", t: "w" } }]);
      await corq.advance();
      await corq.drain("s");
      // the next claim reaches "w" (its turn is the serve's, or the advance's): nothing ready
      await corq.append("b", [{ name: "E", data: { k: "o1", t: "o" } }]);
      await corq.advance();
      await corq.drain("s");
      const out = await turnOf(raw, "w");
      expect(out?.due_at === null || (out?.waits_ms ?? 0) > 500_000, JSON.stringify(out)).toBe(true);
      handled.length = 0;
      await way.wake(corq);
      await corq.drain("s");
      expect(handled).toEqual([way.setup === "failing" ? "fresh" : "w1"]);
    });
});

interface Held {
  lease: Lease;
  seq: number;
  position: number;
  tx: string;
}

/** Claims up to `limit` keys of "s" and leaves them leased: each key's lease and its batch's last event. */
async function holdClaim(raw: import("pg").Pool, limit: number): Promise<Held[]> {
  const query = new PgDialect().sqlToQuery(claimBatch("s", { limit, holder: "held" }));
  const { rows } = await raw.query(query.sql, query.params);
  const held = new Map<string, Held>();
  for (const row of rows)
    if (row.key !== null && row.seq === null)
      held.set(row.key, {
        lease: { subscriptionId: row.subscription_id, key: row.key, token: row.lease_token },
        seq: 0,
        position: 0,
        tx: "0",
      });
  for (const row of rows) {
    const h = row.key === null || row.seq === null ? undefined : held.get(row.key);
    if (h) Object.assign(h, { seq: Number(row.seq), position: Number(row.position), tx: String(row.tx) });
  }
  return [...held.values()];
}

async function run(raw: import("pg").Pool, statement: SQL) {
  const query = new PgDialect().sqlToQuery(statement);
  await raw.query(query.sql, query.params);
}
