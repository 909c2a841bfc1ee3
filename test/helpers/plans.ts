// Reading a statement's plan (EXPLAIN without ANALYZE: nothing runs) and judging it against the
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
  Plans?: PlanNode[];
}

/** The two plans a statement can run with: planned for its parameters, or for any (a prepared statement's). */
export type PlanMode = "custom" | "generic";

const dialect = new PgDialect();

/**
 * The plan of `query` — the SQL text and parameters corq sends — in each mode. The statement is
 * PREPAREd and EXPLAINed with EXECUTE: `custom` is planned for these parameters (what an
 * unnamed statement gets, e.g. over Neon's HTTP path), `generic` for none (what a named
 * prepared statement settles on after five runs: corq prepares its statements on Node).
 */
export async function explain(client: pg.ClientBase, query: SQL): Promise<Record<PlanMode, PlanNode>> {
  const { sql: text, params } = dialect.sqlToQuery(query);
  await client.query(`PREPARE plan_check AS ${text}`);
  try {
    const plans: Partial<Record<PlanMode, PlanNode>> = {};
    for (const mode of ["custom", "generic"] as const) {
      await client.query(`SET plan_cache_mode = force_${mode}_plan`);
      const { rows } = await client.query(`EXPLAIN (FORMAT JSON) EXECUTE plan_check${args(client, params)}`);
      plans[mode] = rows[0]["QUERY PLAN"][0].Plan as PlanNode;
    }
    return plans as Record<PlanMode, PlanNode>;
  } finally {
    await client.query("RESET plan_cache_mode");
    await client.query("DEALLOCATE plan_check");
  }
}

/**
 * A session's cached plan of `query`, as corq's own pool gets one (src/corq/connect.ts): the
 * statement is PREPAREd as `name` and its generic plan made NOW, with the tables as they are, and
 * kept (a generic plan is made once and reused until a table it reads is vacuumed, analyzed or
 * altered). `explainCached` then shows that plan for the parameters of the same statement text.
 */
export async function cacheGenericPlan(client: pg.ClientBase, name: string, query: SQL): Promise<void> {
  const { sql: text, params } = dialect.sqlToQuery(query);
  await client.query(`PREPARE ${name} AS ${text}`);
  await client.query("SET plan_cache_mode = force_generic_plan");
  try {
    await client.query(`EXPLAIN EXECUTE ${name}${args(client, params)}`);
  } finally {
    await client.query("RESET plan_cache_mode");
  }
  cachedTexts.set(`${name}`, text);
}

const cachedTexts = new Map<string, string>();

/** The plan `cacheGenericPlan` cached as `name`, EXPLAINed with the parameters of `query` (the same text). */
export async function explainCached(client: pg.ClientBase, name: string, query: SQL): Promise<PlanNode> {
  const { sql: text, params } = dialect.sqlToQuery(query);
  if (cachedTexts.get(name) !== text) throw new Error(`${name}: not the statement text that was prepared`);
  await client.query("SET plan_cache_mode = force_generic_plan");
  try {
    const { rows } = await client.query(`EXPLAIN (FORMAT JSON) EXECUTE ${name}${args(client, params)}`);
    return rows[0]["QUERY PLAN"][0].Plan as PlanNode;
  } finally {
    await client.query("RESET plan_cache_mode");
  }
}

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
 *           entry per read (a pick reads the ready index twice: live keys, then replaying ones);
 *   reads   conditions some scan must carry (e.g. the advance's scan starts at the watermark).
 */
export interface Intent {
  walks: string[];
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
      if (node["Node Type"] === "Seq Scan" && (CHURN.has(relation) || relation === "events"))
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
  const expected = [...intent.walks].sort();
  if (walks.sort().join() !== expected.join())
    offenses.push(`ordered walks: [${walks.join(", ")}], meant: [${expected.join(", ")}]`);
  for (const read of intent.reads ?? []) {
    const found = seen.some((n) => n["Relation Name"] === read.relation && read.cond.test(conditions(n)));
    if (!found) offenses.push(`no scan of ${read.relation} with ${read.cond} (${read.why})`);
  }
  return offenses;
}

const conditions = (node: PlanNode) =>
  [node["Index Cond"], node["Recheck Cond"]].filter((c) => c !== undefined).join(" AND ");

/** The index condition fixes the key (or the event's position): at most as many rows as named. */
const pinned = (node: PlanNode) => /\("?(key|position)"? = /.test(conditions(node));

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
