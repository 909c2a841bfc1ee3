// The packed package in an app that has its own hono and drizzle-orm — the oldest minors the
// peer ranges admit (npm aliases in devDependencies: hono-4.12, drizzle-orm-0.44): npm keeps
// ONE copy of each, the app's; the app's Hono routes sit beside corq's Worker, and an `SQL`
// built with the app's drizzle `sql` runs in corq's `ctx.run` (type-checked, then run).
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { packAndInstall, repoTool, root, writeUserTsconfig, type Installed } from "../infra/packInstall.js";
import { createTestDatabase } from "./helpers/database.js";

const versions = { hono: "hono-4.12", "drizzle-orm": "drizzle-orm-0.44" };
let installed: Installed;
let database: { url: string; drop(): Promise<void> };

beforeAll(async () => {
  installed = packAndInstall({ versions });
  database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
}, 300_000);
afterAll(async () => {
  await database?.drop();
  if (installed) rmSync(installed.dir, { recursive: true, force: true });
});

const app = `import { Hono } from "hono";
import { sql as appSql } from "drizzle-orm";
import { createCorq, sql, type DeliveredEvent } from "corqueue";
import { createWorker } from "corqueue/worker";

const corqWorker = createWorker({ subscriptions: [{ name: "audit", handle: async () => {} }] });
const app = new Hono();
app.get("/", (c) => c.text("my app"));
app.all("/corq/*", (c) => corqWorker.fetch(c.req.raw, c.env as never, c.executionCtx));

const rows: unknown[] = [];
const corq = createCorq({
  databaseUrl: process.env.DATABASE_URL,
  subscriptions: [
    {
      name: "orders",
      key: "data.customer",
      async handle(events: DeliveredEvent[], ctx) {
        for (const event of events) {
          await ctx.run(appSql\`INSERT INTO orders (id, seq) VALUES (\${event.stream}, \${event.seq})\`);
          rows.push(...(await ctx.run(sql\`UPDATE orders SET seen = true WHERE id = \${event.stream} RETURNING *\`)));
        }
      },
    },
  ],
  migrations: [{ name: "orders", statements: ["CREATE TABLE orders (id text PRIMARY KEY, seq int, seen boolean)"] }],
});
await corq.migrate();
await corq.append("order-1", [{ name: "OrderPlaced", data: { customer: "ada" } }]);
await corq.append("order-2", [{ name: "OrderPlaced", data: { customer: "bob" } }]);
await corq.advance();
const { batches } = await corq.drain("orders", { budgetMs: 5000 });
await corq.close();
const home = await app.request("/");
console.log(JSON.stringify({ batches, rows, home: await home.text() }));
`;

const versionOf = (name: string, from = installed.dir) =>
  (JSON.parse(readFileSync(join(from, "node_modules", name, "package.json"), "utf8")) as { version: string }).version;

describe("the packed package beside the app's own hono and drizzle-orm (older minors)", () => {
  it("installs one copy of each peer: the app's", () => {
    expect(versionOf("hono")).toBe(versionOf("hono-4.12", root));
    expect(versionOf("drizzle-orm")).toBe(versionOf("drizzle-orm-0.44", root));
    expect(versionOf("hono")).not.toBe(versionOf("hono", root)); // not the repository's own
    expect(existsSync(join(installed.dir, "node_modules/corqueue/node_modules/hono"))).toBe(false);
    expect(existsSync(join(installed.dir, "node_modules/corqueue/node_modules/drizzle-orm"))).toBe(false);
  });

  it("type-checks and runs: the app's Hono routes, and the app's drizzle sql in ctx.run", () => {
    writeFileSync(join(installed.dir, "app.ts"), app);
    writeUserTsconfig(installed.dir, { files: ["app.ts"] });
    repoTool("tsc", ["-p", "."], { cwd: installed.dir });
    const output = execFileSync(process.execPath, ["out/app.js"], {
      cwd: installed.dir,
      env: { ...process.env, DATABASE_URL: database.url },
      encoding: "utf8",
    });
    const result = JSON.parse(output.trim().split("\n").at(-1) ?? "");
    expect(result.home).toBe("my app");
    expect(result.batches).toBe(2);
    expect(result.rows.sort((a: { id: string }, b: { id: string }) => a.id.localeCompare(b.id))).toEqual([
      { id: "order-1", seq: 1, seen: true },
      { id: "order-2", seq: 1, seen: true },
    ]);
  }, 120_000);
});
