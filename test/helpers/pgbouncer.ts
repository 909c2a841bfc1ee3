// A PgBouncer of a test's own in transaction mode (what Neon's pooled `-pooler` host and most
// self-hosted poolers run): Debian's `pgbouncer` package (1.18: no named prepared statements),
// a config in a temporary directory, a free port, every database of one Postgres behind it.
// Installed by .ci/run, which sets CORQ_REQUIRE_PGBOUNCER: there a missing binary fails the test
// file instead of skipping it (as CORQ_REQUIRE_BROWSER does for the browser tests).
import { spawn } from "node:child_process";
import pg from "pg";
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";

export const pgbouncerPath = process.env.CORQ_PGBOUNCER ?? "/usr/sbin/pgbouncer";

/**
 * Whether the pooler tests can run here: false (with a warning) when there is no PgBouncer,
 * unless CORQ_REQUIRE_PGBOUNCER is set, where it throws.
 */
export function pgbouncerAvailable(what: string): boolean {
  if (existsSync(pgbouncerPath)) return true;
  if (process.env.CORQ_REQUIRE_PGBOUNCER)
    throw new Error(
      `PgBouncer is required here (CORQ_REQUIRE_PGBOUNCER) but ${pgbouncerPath} does not exist: apt-get install pgbouncer`,
    );
  console.warn(
    `\n  SKIPPING ${what}: no PgBouncer at ${pgbouncerPath} (apt-get install pgbouncer, or set CORQ_PGBOUNCER)\n`,
  );
  return false;
}

export interface RunningPgBouncer {
  /** `databaseUrl` (or another database's URL on the same server) through the pooler. */
  pooled(databaseUrl: string): string;
  /** Everything it logged so far. */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts PgBouncer in front of the Postgres `serverUrl` points at (its user and password are
 * the pooler's, as Neon's are): pool_mode = transaction, `poolSize` server connections per
 * database and user (default 4: few, so that every client of the pooler shares them), and no
 * server_reset_query in transaction mode (PgBouncer's default: what a session SET leaves
 * behind is seen by the next client).
 */
export async function startPgBouncer(
  serverUrl: string,
  options: { poolSize?: number } = {},
): Promise<RunningPgBouncer> {
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username);
  const password = decodeURIComponent(server.password);
  const dir = mkdtempSync(join(tmpdir(), "corq-pgbouncer-"));
  const quoted = (text: string) => `"${text.replaceAll('"', '""')}"`;
  writeFileSync(join(dir, "userlist.txt"), `${quoted(user)} ${quoted(password)}\n`, { mode: 0o600 });
  // PgBouncer refuses to run as root: as root it is started with -u, as a user that must read its files
  const asRoot = userInfo().uid === 0;
  const runAs = asRoot ? "nobody" : undefined;
  let lastError: Error | undefined;
  // a port the kernel found free can be taken before PgBouncer binds it: a second try on another
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    writeFileSync(
      join(dir, "pgbouncer.ini"),
      [
        "[databases]",
        `* = host=${server.hostname} port=${server.port || 5432}`,
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        `listen_port = ${port}`,
        "unix_socket_dir =",
        "auth_type = scram-sha-256",
        `auth_file = ${join(dir, "userlist.txt")}`,
        "pool_mode = transaction",
        `default_pool_size = ${options.poolSize ?? 4}`,
        "max_client_conn = 500",
        // node-postgres sends no other startup parameter than these (and application_name)
        "ignore_startup_parameters = extra_float_digits",
        "",
      ].join("\n"),
    );
    if (runAs) {
      for (const file of ["", "pgbouncer.ini", "userlist.txt"]) chownSync(join(dir, file), 65534, 65534);
      chmodSync(dir, 0o700);
    }
    try {
      return await run(port, dir, runAs, server);
    } catch (error) {
      lastError = error as Error;
      if (!/Address already in use/.test(lastError.message)) break;
    }
  }
  rmSync(dir, { recursive: true, force: true });
  throw lastError ?? new Error("PgBouncer did not start");
}

async function run(port: number, dir: string, runAs: string | undefined, server: URL): Promise<RunningPgBouncer> {
  const args = [...(runAs ? ["-u", runAs] : []), join(dir, "pgbouncer.ini")];
  const child = spawn(pgbouncerPath, args, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`PgBouncer did not start within 10 s:\n${output}`)), 10_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (/process up/.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`PgBouncer exited (${code}) at start:\n${output}`));
    });
  });
  return {
    pooled(databaseUrl) {
      const url = new URL(databaseUrl);
      if (url.host !== server.host)
        throw new Error(`${url.host} is not the server behind this PgBouncer (${server.host})`);
      url.hostname = "127.0.0.1";
      url.port = String(port);
      return url.toString();
    },
    output: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/** What a pooler's other clients must find on their sessions: the server's own values (a session SET of corq's would show). */
export const SESSION_SETTINGS = [
  "jit",
  "synchronous_commit",
  "lock_timeout",
  "statement_timeout",
  "enable_seqscan",
  "max_parallel_workers_per_gather",
  "default_transaction_isolation",
];

/** `SESSION_SETTINGS` as a client connecting to `url` finds them, and the server session (pid) it ran on. */
export async function sessionSettings(url: string): Promise<{ pid: number; settings: Record<string, string> }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number; values: string[] }>(
      `SELECT pg_backend_pid() AS pid, array[${SESSION_SETTINGS.map((s) => `current_setting('${s}')`).join(", ")}] AS values`,
    );
    const row = rows[0];
    if (!row) throw new Error("no row");
    return { pid: row.pid, settings: Object.fromEntries(SESSION_SETTINGS.map((s, i) => [s, row.values[i] ?? ""])) };
  } finally {
    await client.end();
  }
}

/**
 * The settings found on the pooler's server sessions by `clients` clients at once (each reports
 * the session it ran on), by session pid; `between` runs before each round (corq's traffic).
 */
export async function pooledSessionSettings(
  pooledUrl: string,
  options: { clients: number; rounds: number; between?: () => Promise<unknown> },
): Promise<Map<number, Record<string, string>>> {
  const seen = new Map<number, Record<string, string>>();
  for (let round = 0; round < options.rounds; round++) {
    await options.between?.();
    const views = await Promise.all(Array.from({ length: options.clients }, () => sessionSettings(pooledUrl)));
    for (const view of views) seen.set(view.pid, view.settings);
  }
  return seen;
}
