// Reading a statement's plan (EXPLAIN; with ANALYZE only where asked) and judging it against the
// index order it is meant to have (docs/architecture.md, "The fast plan is the only plan").
import type { SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import type pg from "pg";

/** A node of EXPLAIN (FORMAT JSON), with the fields the checks read. */
export interface PlanNode {
  "Node Type": string;
  "Parent Relationship"?: string;
  "Subplan Name"?: string;
  "Relation Name"?: string;
  Alias?: string;
  "Index Name"?: string;
  "Index Cond"?: string;
  "Recheck Cond"?: string;
  Filter?: string;
  "Sort Key"?: string[];
  "Total Cost": number;
  /** With `buffers`: the pages the node (and what ran beneath it, functions too) read. */
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Plans?: PlanNode[];
}

const dialect = new PgDialect();

/**
 * The plan of `query` — the SQL text and parameters corq sends — planned for its parameters, as
 * corq's unnamed statements are every time (nothing is prepared: src/corq/connect.ts). The
 * statement is PREPAREd and EXPLAINed with EXECUTE under `force_custom_plan`, so the parameters
 * keep the types the statement gives them. `analyze`: run it too (EXPLAIN ANALYZE, in a
 * transaction rolled back) — the plan then says whether it was JIT-compiled; `buffers` (with
 * `analyze`): the pages each node read.
 */
export async function explain(
  client: pg.ClientBase,
  query: SQL,
  options: { analyze?: boolean; buffers?: boolean } = {},
): Promise<PlanNode & { jit?: unknown }> {
  const { sql: text, params } = dialect.sqlToQuery(query);
  // in a transaction of its own, rolled back: what a run (ANALYZE) changed goes, and so does the
  // setting, also when the statement fails
  await client.query("BEGIN");
  try {
    await client.query(`PREPARE plan_check AS ${text}`);
    await client.query("SET LOCAL plan_cache_mode = force_custom_plan");
    const { rows } = await client.query(
      `EXPLAIN (FORMAT JSON${options.analyze ? ", ANALYZE" : ""}${options.buffers ? ", BUFFERS" : ""}) EXECUTE plan_check${args(client, params)}`,
    );
    const [explained] = rows[0]["QUERY PLAN"];
    return Object.assign(explained.Plan as PlanNode, { jit: explained.JIT });
  } finally {
    // what it changed, rolled back: the plan check changes nothing (and a prepared statement is
    // not transactional: deallocated after)
    await client.query("ROLLBACK");
    await client.query("DEALLOCATE plan_check").catch(() => undefined);
  }
}

/**
 * Postgres JIT-compiles a statement whose estimated total cost passes `jit_above_cost` (100,000 by
 * default; wherever LLVM is built — Debian/Ubuntu packages, RDS, Cloud SQL — that costs 0.5–20 s
 * for a big CTE: DESIGN invariant 12). A hot statement stays far below it, at any table size.
 */
export const MAX_COST = 10_000;

/** The offense of a plan whose estimated cost passes `max` (none: an empty list). */
export const costOffenses = (plan: PlanNode, max = MAX_COST): string[] =>
  plan["Total Cost"] > max ? [`estimated at cost ${plan["Total Cost"]}, over ${max}`] : [];

const args = (client: pg.ClientBase, params: unknown[]) =>
  params.length > 0 ? `(${params.map((p) => literal(client, p)).join(", ")})` : "";

/** A parameter as an SQL literal (the statement's casts give it its type). */
function literal(client: pg.ClientBase, value: unknown): string {
  if (value === null || value === undefined) return "NULL";
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  if (typeof value === "boolean") return value ? "true" : "false";
  if (Array.isArray(value)) {
    const element = (v: unknown) =>
      v === null || v === undefined ? "NULL" : `"${String(v).replace(/["\\]/g, "\\$&")}"`;
    return client.escapeLiteral(`{${value.map(element).join(",")}}`);
  }
  if (value instanceof Date) return client.escapeLiteral(value.toISOString());
  return client.escapeLiteral(String(value));
}

/**
 * What a hot statement is meant to read, beyond the rules every one keeps:
 *   walks   the indexes its unpinned reads of keys and queue walk in order under a LIMIT, one
 *           entry per read (a pick reads the ready index twice: live keys, then replaying ones),
 *           `a|b` where either index will do;
 *   reads   conditions some scan must carry (e.g. the advance's scan starts at the watermark);
 *   counts  tables it counts whole where they match (the stats count every key with work:
 *           what it costs is the work pending, and no index order can make it less);
 *   exempt  reads of keys or queue, by a condition or filter they carry, that may be planned
 *           either way (and are not counted as walks), with why.
 */
export interface Intent {
  walks: string[];
  counts?: string[];
  exempt?: { filter: RegExp; why: string };
  reads?: { relation: string; cond: RegExp; why: string }[];
}

// The churn tables: their heap order has nothing to do with any index order, so a read of them
// that is sorted afterwards reads (and sorts) every row that matches, however few are wanted.
const CHURN = new Set(["keys", "queue"]);
const SCANS = new Set(["Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan"]);
// Between an ordered index walk and its LIMIT, only nodes that pass rows on in the order they come.
const IN_ORDER = new Set(["LockRows", "Result", "Nested Loop"]);

/**
 * The offending nodes of `plan`, one line each (empty: the plan is as meant). Rules:
 *   1. no Seq Scan of keys, queue or events;
 *   2. a scan of keys or queue is either pinned to named rows (its index condition fixes the key:
 *      `key = …`, `key = ANY(…)`) or an index walk in order, on the outer side of every join,
 *      under a LIMIT with nothing between that collects rows (a Sort, a Hash, an Aggregate …);
 *   3. the walks are the intended ones (Intent.walks), and the intended reads are there.
 * Events are read by position (pinned) or from the watermark (rule 3); a bitmap read of the
 * range past the watermark is fine: the log is append-only, so its heap is in log order.
 */
export function planOffenses(plan: PlanNode, intent: Intent): string[] {
  const offenses: string[] = [];
  const walks: string[] = [];
  const seen: PlanNode[] = [];
  const visit = (node: PlanNode, ancestors: PlanNode[]) => {
    const relation = node["Relation Name"];
    if (relation !== undefined && SCANS.has(node["Node Type"])) {
      seen.push(node);
      if (intent.counts?.includes(relation)) {
        // counted whole by design (Intent.counts): any scan will do
      } else if (intent.exempt?.filter.test(`${conditions(node)} ${node.Filter ?? ""}`)) {
        // either plan will do (Intent.exempt)
      } else if (node["Node Type"] === "Seq Scan" && (CHURN.has(relation) || relation === "events"))
        offenses.push(describe(node, ancestors, "reads the whole table"));
      else if (CHURN.has(relation) && !pinned(node)) {
        const problem = orderedWalkProblem(node, ancestors);
        if (problem) offenses.push(describe(node, ancestors, problem));
        else walks.push(node["Index Name"] ?? "?");
      }
    }
    for (const child of node.Plans ?? []) visit(child, [...ancestors, node]);
  };
  visit(plan, []);
  // each meant walk names its index, or the indexes either of which will do ("a|b")
  const unmatched = [...intent.walks];
  const extra = walks.filter((walk) => {
    const at = unmatched.findIndex((meant) => meant.split("|").includes(walk));
    if (at < 0) return true;
    unmatched.splice(at, 1);
    return false;
  });
  if (extra.length > 0 || unmatched.length > 0)
    offenses.push(`ordered walks: [${walks.sort().join(", ")}], meant: [${[...intent.walks].sort().join(", ")}]`);
  for (const read of intent.reads ?? []) {
    const found = seen.some((n) => n["Relation Name"] === read.relation && read.cond.test(conditions(n)));
    if (!found) offenses.push(`no scan of ${read.relation} with ${read.cond} (${read.why})`);
  }
  return offenses;
}

const conditions = (node: PlanNode) =>
  [node["Index Cond"], node["Recheck Cond"]].filter((c) => c !== undefined).join(" AND ");

/**
 * The index condition fixes the key (or the event's position): at most as many rows as named.
 * Either side of the `=` (a join's lookup reads `(i.key = key)`).
 */
const pinned = (node: PlanNode) => /\("?(key|position)"? = |= "?(key|position)"?\)/.test(conditions(node));

/** Why `node` (an unpinned scan of a churn table) is not an index walk read in order under a LIMIT. */
function orderedWalkProblem(node: PlanNode, ancestors: PlanNode[]): string | undefined {
  if (node["Node Type"] !== "Index Scan" && node["Node Type"] !== "Index Only Scan")
    return `a ${node["Node Type"]} has no order`;
  let child = node;
  for (const parent of [...ancestors].reverse()) {
    const relationship = child["Parent Relationship"];
    if (relationship === "InitPlan" || relationship === "SubPlan" || relationship === undefined)
      return "no LIMIT above it: every row that matches is read";
    if (parent["Node Type"] === "Limit") return undefined;
    if (!IN_ORDER.has(parent["Node Type"]))
      return `${parent["Node Type"]}${sortKey(parent)} between it and its LIMIT: every row that matches is read`;
    if (parent["Node Type"] === "Nested Loop" && relationship !== "Outer")
      return "the inner side of a join: read again for every outer row";
    child = parent;
  }
  return "no LIMIT above it: every row that matches is read";
}

const sortKey = (node: PlanNode) => (node["Sort Key"] ? ` [${node["Sort Key"].join(", ")}]` : "");

/** One line: the node, where it sits (the CTE or subplan), and what it reads. */
function describe(node: PlanNode, ancestors: PlanNode[], problem: string): string {
  const where = [...ancestors, node]
    .map((n) => n["Subplan Name"])
    .filter((name) => name !== undefined)
    .join(" > ");
  const index = node["Index Name"] ? ` using ${node["Index Name"]}` : "";
  const reads = [conditions(node) && `cond ${conditions(node)}`, node.Filter && `filter ${node.Filter}`].filter(
    Boolean,
  );
  return `${node["Node Type"]}${index} on ${node["Relation Name"]} ${node.Alias ?? ""}${where ? ` in ${where}` : ""}: ${problem}${reads.length > 0 ? `; ${reads.join("; ")}` : ""}`;
}
