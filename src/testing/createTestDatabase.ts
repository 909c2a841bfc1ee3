// A database of its own for a test (or a test file): created empty under a unique name on the
// server `serverUrl` points at, dropped when the test is done. The test then creates its corq on
// `url` and calls migrate() (corq's schema and the app's migrations). Node only (node-postgres).
import type pg from "pg";

// a variable specifier: a Worker's bundle of the test kit (builders, handlerContext) leaves pg out
const NODE_POSTGRES = "pg";

export interface TestDatabase {
  /** The new database's connection string (serverUrl with its database name replaced). */
  url: string;
  /** Drops the database, ending any connection still open to it (WITH (FORCE), Postgres 13+). */
  drop(): Promise<void>;
}

/**
 * Creates a database named `<prefix>_<12 random hex digits>` (prefix default "corq_test") on the
 * server of `serverUrl` (a user allowed to CREATE DATABASE; its own database is only used to
 * connect). `template`: clone a database instead of template1 — e.g. one migrated once, which is
 * faster than migrating per test.
 */
export async function createTestDatabase(
  serverUrl: string,
  options: { prefix?: string; template?: string } = {},
): Promise<TestDatabase> {
  const prefix = options.prefix ?? "corq_test";
  if (!/^[a-z_][a-z0-9_]{0,40}$/.test(prefix)) throw new Error(`createTestDatabase: bad prefix "${prefix}"`);
  const random = [...crypto.getRandomValues(new Uint8Array(6))].map((b) => b.toString(16).padStart(2, "0")).join("");
  const name = `${prefix}_${random}`;
  const template = options.template === undefined ? "" : ` TEMPLATE ${quoteIdentifier(options.template)}`;
  await withServer(serverUrl, (client) => client.query(`CREATE DATABASE ${name}${template}`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => withServer(serverUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)),
  };
}

async function withServer(serverUrl: string, use: (client: pg.Client) => Promise<unknown>): Promise<void> {
  const { default: nodePostgres } = (await import(/* @vite-ignore */ NODE_POSTGRES)) as typeof import("pg");
  const client = new nodePostgres.Client({ connectionString: serverUrl });
  // before connect: a FATAL read with the ReadyForQuery is emitted before `await` resumes (src/db/guardPool.ts);
  // the statement after it fails instead
  client.on("error", () => undefined);
  await client.connect();
  try {
    await use(client);
  } finally {
    await client.end();
  }
}

function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
