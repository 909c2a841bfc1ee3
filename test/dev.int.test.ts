// `corq dev` on a user's own Worker, outside this repository: a directory of its own with its
// wrangler.toml, .dev.vars and worker.ts (createWorker around one code subscription, beside a
// route of its own), run as a process as a user runs it, on a test database (DATABASE_URL).
// Linux only (the process tree from /proc).
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { freePort } from "../cli/dev/embeddedPostgres.js";
import { createTestDatabase } from "./helpers/database.js";
import { alive, descendants, watched } from "./helpers/processTree.js";

/** Whether `check` holds within `timeoutMs` (polled every 100 ms). */
async function holds(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; ) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return check();
}

const root = fileURLToPath(new URL("..", import.meta.url));
const cli = join(root, "cli/main.ts");
const tsx = import.meta.resolve("tsx"); // the loader from here: the user's directory need not have it
const temp = mkdtempSync(join(tmpdir(), "corq-dev-"));
const started: ChildProcess[] = [];
const seen = new Set<number>();

afterAll(() => {
  // a failed test must not leave its process tree behind (only the processes it started)
  for (const pid of seen) if (alive(pid)) process.kill(pid, "SIGKILL");
  for (const child of started) if (child.exitCode === null) child.kill("SIGKILL");
  rmSync(temp, { recursive: true, force: true });
});

/** `corq dev` in `cwd`, as `npx corq dev` runs it (here from the source, through tsx). */
function corqDev(cwd: string, args: string[], env: Record<string, string>) {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, WRANGLER_SEND_METRICS: "false", ...env };
  for (const name of ["PORT", "CORQ_ADMIN_TOKEN", "CORQ_WEBHOOK_SECRET", "CORQ_DATA_DIR"]) delete childEnv[name];
  if (!env.DATABASE_URL) delete childEnv.DATABASE_URL;
  const child = spawn(process.execPath, ["--import", tsx, cli, "dev", ...args], {
    cwd,
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  started.push(child);
  return watched(child);
}

/** The user's Worker: its own route, corq's API and cron, a subscription whose key "flaky" fails once. */
function writeUserWorker(dir: string) {
  writeFileSync(
    join(dir, "wrangler.toml"),
    `name = "my-shop"
main = "src/worker.ts"
compatibility_date = "2026-04-20"
compatibility_flags = ["nodejs_compat"]
services = [{ binding = "SELF", service = "my-shop" }]

[vars]
GREETING = "hello from wrangler.toml"
`,
  );
  writeFileSync(join(dir, ".dev.vars"), "SHOP_SECRET=from-dev-vars\n");
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "my-shop", private: true, type: "module" }));
  const source = join(dir, "src");
  mkdirSync(source);
  writeFileSync(
    join(source, "worker.ts"),
    `import { sql } from "drizzle-orm";
import { createWorker } from ${JSON.stringify(join(root, "functions/createWorker.ts"))};

const corq = createWorker({
  subscriptions: [
    {
      name: "orders",
      events: ["Placed"],
      key: "stream",
      backoff: { initialMs: 200, maxMs: 200 },
      async handle(events, ctx) {
        if (ctx.key === "flaky" && ctx.attempt === 1) throw new Error("flaky fails its first attempt");
        for (const event of events)
          await ctx.run(sql\`INSERT INTO shop.handled (key, position, attempt) VALUES (\${ctx.key}, \${event.position}, \${ctx.attempt})\`);
      },
    },
  ],
  migrations: [
    {
      name: "shop-1",
      statements: [
        "CREATE SCHEMA IF NOT EXISTS shop",
        "CREATE TABLE shop.handled (key text NOT NULL, position bigint NOT NULL, attempt int NOT NULL)",
      ],
    },
  ],
});

export default {
  async fetch(request: Request, env: Record<string, string>, ctx: ExecutionContext) {
    if (new URL(request.url).pathname === "/hello")
      return Response.json({ greeting: env.GREETING, secret: env.SHOP_SECRET });
    return corq.fetch(request, env as never, ctx);
  },
  scheduled: corq.scheduled,
};
`,
  );
  // the user's dependencies (here: this repository's)
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir");
}

describe("corq dev on a user's Worker (DATABASE_URL)", () => {
  const dir = join(temp, "my-shop");
  const state = {} as {
    port: number;
    dev: ReturnType<typeof corqDev>;
    db: pg.Pool;
    drop: () => Promise<void>;
  };
  const url = () => `http://127.0.0.1:${state.port}`;
  const admin = { authorization: "Bearer dev-admin-token" };

  beforeAll(async () => {
    mkdirSync(dir);
    writeUserWorker(dir);
    // an empty database: corq dev applies corq's schema, the Worker its app's
    const database = await createTestDatabase(inject("postgresUrl"), { migrated: false });
    state.drop = database.drop;
    state.db = new pg.Pool({ connectionString: database.url, max: 2 });
    state.db.on("error", () => undefined);
    state.port = await freePort();
    state.dev = corqDev(dir, ["--port", String(state.port)], { DATABASE_URL: database.url });
    const ready = await holds(
      () => state.dev.output().includes("corq ready") || state.dev.child.exitCode !== null,
      150_000,
    );
    expect(ready && state.dev.child.exitCode === null, state.dev.output()).toBe(true);
  }, 180_000);
  afterAll(async () => {
    if (state.dev?.child.exitCode === null) state.dev.child.kill("SIGKILL");
    await state.db?.end();
    await state.drop?.();
  });

  it("prints one ready line with its URL, and the admin token it made up", () => {
    const lines = state.dev.output().split("\n");
    expect(lines.filter((line) => line.includes("corq ready"))).toEqual([`corq ready ${url()}`]);
    expect(lines).toContain("admin token: dev-admin-token (set CORQ_ADMIN_TOKEN to change it)");
  });

  it("serves corq's API (GET /health 200) and the user's own route, with wrangler.toml's vars and .dev.vars", async () => {
    expect((await fetch(`${url()}/health`)).status).toBe(200);
    const hello = await fetch(`${url()}/hello`);
    expect(await hello.json()).toEqual({ greeting: "hello from wrangler.toml", secret: "from-dev-vars" });
  });

  it("has the Worker's subscription registered by the Worker itself before any event", async () => {
    const stats = await fetch(`${url()}/stats`, { headers: admin });
    expect(stats.status).toBe(200);
    const { subscriptions } = (await stats.json()) as { subscriptions: { name: string; kind: string }[] };
    expect(subscriptions.map((s) => [s.name, s.kind])).toEqual([["orders", "code"]]);
  });

  it("handles appended events; a key whose first attempt failed is retried by the cron, nobody calling", async () => {
    for (const stream of ["steady", "flaky"]) {
      const appended = await fetch(`${url()}/streams/${stream}/events`, {
        method: "POST",
        headers: { ...admin, "content-type": "application/json" },
        body: JSON.stringify({ events: [{ name: "Placed", data: { stream } }] }),
      });
      expect(appended.status).toBe(201);
    }
    const handled = async () =>
      (await state.db.query("SELECT key, attempt FROM shop.handled ORDER BY key")).rows.map((r) => [r.key, r.attempt]);
    const done = await holds(async () => (await handled()).length === 2, 30_000);
    expect(done, state.dev.output()).toBe(true);
    expect(await handled()).toEqual([
      ["flaky", 2],
      ["steady", 1],
    ]);
  }, 40_000);

  it("stops on SIGTERM: exit 0, nothing it started left running", async () => {
    const tree = descendants(state.dev.child.pid!);
    for (const { pid } of tree) seen.add(pid);
    expect(tree.map((p) => p.comm)).toContain("workerd");
    state.dev.child.kill("SIGTERM");
    const code = await state.dev.exited;
    const stopped = await holds(() => tree.every(({ pid }) => !alive(pid)), 15_000);
    const left = tree.filter(({ pid }) => alive(pid)).map(({ pid, comm }) => `${pid} ${comm}`);
    expect({ code, stopped, left }, `${state.dev.output()}\n${JSON.stringify(state.dev.child.signalCode)}`).toEqual({
      code: 0,
      stopped: true,
      left: [],
    });
  }, 30_000);
});

describe("corq dev without a Worker to run", () => {
  it("says where it looked and how to name one, and exits 2", async () => {
    const empty = mkdtempSync(join(temp, "empty-"));
    const dev = corqDev(empty, [], {});
    expect(await dev.exited).toBe(2);
    expect(dev.output()).toBe(
      `corq: no wrangler.toml (or wrangler.json / wrangler.jsonc) in ${empty}: run corq dev in your Worker's directory, or pass --config <path>\n`,
    );
  });
});
