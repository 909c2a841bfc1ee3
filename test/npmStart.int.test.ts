// `npm start` as a user runs it: a real process tree (npm → node → Postgres, workerd) on a
// port and a data dir of its own. Linux only (reads /proc).
import { afterAll, describe, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { freePort } from "../cli/dev/embeddedPostgres.js";
import { sign } from "../src/webhookSignature.js";
import { createCorq } from "../src/index.js";
import { alive, descendants, watched } from "./helpers/processTree.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), "corq-npm-start-"));
chmodSync(dataDir, 0o755); // as root, the server runs as the `postgres` user, who must reach the data dir
const started: ChildProcess[] = [];
const seen = new Set<number>();
afterAll(() => {
  // a failed test must not leave its process tree behind (only the processes it started)
  for (const pid of seen) if (alive(pid)) process.kill(pid, "SIGKILL");
  for (const child of started) if (child.exitCode === null) child.kill("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
});

/** `detached`: in a process group of its own, as in a terminal of its own. */
function npmStart(port: number | undefined, options: { detached?: boolean } = {}) {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    CORQ_DATA_DIR: dataDir,
    WRANGLER_SEND_METRICS: "false",
  };
  if (port === undefined) delete env.PORT;
  // the defaults: the embedded Postgres, dev-admin-token, dev-webhook-secret
  for (const name of ["DATABASE_URL", "CORQ_ADMIN_TOKEN", "CORQ_WEBHOOK_SECRET"]) delete env[name];
  const child = spawn("npm", ["start"], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: options.detached,
  });
  started.push(child);
  return watched(child);
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; ) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return check();
}

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });

/** SIGTERM to the process group (the stack stops itself), then SIGKILL to what is left of it. */
async function stopGroup(start: ReturnType<typeof npmStart>) {
  const pid = start.child.pid!;
  const group = [pid, ...descendants(pid).map((p) => p.pid)];
  process.kill(-pid, "SIGTERM");
  await until(() => group.every((p) => !alive(p)), 20_000);
  for (const p of group) if (alive(p)) process.kill(p, "SIGKILL");
}

// what npm itself prints around the script: its `> corqueue@… start` header and `npm error …` lines
const ownLines = (output: string) =>
  output.split("\n").filter((line) => line.trim() !== "" && !/^(> |npm )/.test(line));

describe("npm start", () => {
  it("with its port taken, says so in one line and exits 1 before starting anything", async () => {
    const port = await freePort();
    const squatter: Server = createServer();
    await new Promise<void>((resolve) => squatter.listen(port, "127.0.0.1", resolve));
    try {
      const start = npmStart(port);
      const code = await Promise.race([
        start.exited,
        new Promise((resolve) => setTimeout(() => resolve("still running"), 30_000)),
      ]);
      expect(code).toBe(1);
      expect(ownLines(start.output())).toEqual([`port ${port} is in use; set PORT= to another port`]);
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  }, 40_000);

  it("listens on 8787 without PORT (shown with 8787 taken: nothing starts)", async () => {
    // taken here for the test's few seconds, unless something already listens there
    const squatter: Server = createServer();
    const taken = await new Promise<boolean>((resolve) => {
      squatter.once("error", () => resolve(false));
      squatter.listen({ port: 8787, host: "127.0.0.1", exclusive: true }, () => resolve(true));
    });
    try {
      // in a group of its own: should it start after all, the whole stack can be stopped
      const start = npmStart(undefined, { detached: true });
      const code = await Promise.race([
        start.exited,
        new Promise((resolve) => setTimeout(() => resolve("still running"), 30_000)),
      ]);
      if (code !== 1) await stopGroup(start);
      expect(code).toBe(1);
      expect(ownLines(start.output())).toEqual(["port 8787 is in use; set PORT= to another port"]);
    } finally {
      if (taken) await new Promise((resolve) => squatter.close(resolve));
    }
  }, 40_000);

  it.each([
    { signal: "SIGTERM" as const, to: "the npm process (kill -TERM <pid>)" },
    { signal: "SIGHUP" as const, to: "its process group (the terminal closed)" },
  ])(
    "stops everything it started on $signal to $to: no Postgres or workerd left, the port free",
    async ({ signal }) => {
      const port = await freePort();
      const toGroup = signal === "SIGHUP";
      const start = npmStart(port, { detached: toGroup });
      const ready = await until(
        () => start.output().includes(`corq ready http://127.0.0.1:${port}`) || start.child.exitCode !== null,
        120_000,
      );
      expect(ready && start.child.exitCode === null, start.output()).toBe(true);
      const tree = descendants(start.child.pid!);
      for (const { pid } of tree) seen.add(pid);
      const names = tree.map((p) => p.comm);
      expect(names).toContain("postgres");
      expect(names).toContain("workerd");
      if (signal === "SIGTERM") await whileRunning(port, start.output());

      process.kill(toGroup ? -start.child.pid! : start.child.pid!, signal);
      // npm ends too: within the same 15 s (its exit is seen a moment after its children's on a loaded machine)
      const npmEnded = () => start.child.exitCode !== null || start.child.signalCode !== null;
      const stopped = await until(
        async () => tree.every(({ pid }) => !alive(pid)) && (await portFree(port)) && npmEnded(),
        15_000,
      ); // docs/contributing.md: within 15 s
      const left = tree.filter(({ pid }) => alive(pid)).map(({ pid, comm }) => `${pid} ${comm}`);
      expect({ stopped, left, npmEnded: npmEnded() }, start.output()).toEqual({
        stopped: true,
        left: [],
        npmEnded: true,
      });
    },
    180_000,
  );
});

/**
 * What a running `npm start` promises besides stopping (docs/contributing.md, "Set up"): one ready line, the
 * default admin token (printed) and webhook secret, its data under CORQ_DATA_DIR with the
 * password file at mode 0600, the example app's tables, and a cron that delivers by itself.
 */
async function whileRunning(port: number, output: string) {
  const url = `http://127.0.0.1:${port}`;
  expect(output.split("\n").filter((line) => line.includes("corq ready"))).toEqual([`corq ready ${url}`]);
  expect(output).toContain("admin token: dev-admin-token (set CORQ_ADMIN_TOKEN to change it)");
  const admin = { authorization: "Bearer dev-admin-token" };
  expect((await fetch(`${url}/stats`, { headers: admin })).status).toBe(200);
  const body = JSON.stringify({ subscription: "greeter" });
  const timestamp = Math.floor(Date.now() / 1000);
  const signed = await fetch(`${url}/dead-letters/retry`, {
    method: "POST",
    body,
    headers: {
      "content-type": "application/json",
      "webhook-id": "msg_npm_start",
      "webhook-timestamp": String(timestamp),
      "webhook-signature": await sign("dev-webhook-secret", { id: "msg_npm_start", timestamp, body }),
    },
  });
  expect(signed.status).toBe(200);

  const passwordFile = join(dataDir, "postgres.password");
  expect(statSync(passwordFile).mode & 0o777).toBe(0o600);
  expect(statSync(join(dataDir, "postgres")).isDirectory()).toBe(true);
  // the cluster's address as the start printed it (password redacted), with the password from its file
  const printed = /postgres: embedded, (\S+)/.exec(output)?.[1];
  expect(printed).toBeDefined();
  const databaseUrl = new URL(printed!);
  databaseUrl.password = readFileSync(passwordFile, "utf8").trim();
  const db = new pg.Client({ connectionString: databaseUrl.toString() });
  await db.connect();
  try {
    const { rows } = await db.query(
      "SELECT to_regclass('example.rooms') IS NOT NULL AS rooms, to_regclass('example.visitors') IS NOT NULL AS visitors",
    );
    expect(rows).toEqual([{ rooms: true, visitors: true }]);
    // straight into the database (no append request, so no kick): only the cron delivers it
    const corq = createCorq({ databaseUrl: databaseUrl.toString() });
    try {
      await corq.append("visitor-cron", [{ name: "Registered", data: { name: "Cron" } }]);
    } finally {
      await corq.close();
    }
    const delivered = await until(async () => {
      const found = await db.query("SELECT name FROM example.visitors WHERE stream = 'visitor-cron'");
      return found.rows.length === 1;
    }, 20_000);
    expect(delivered).toBe(true);
  } finally {
    await db.end();
  }
}
