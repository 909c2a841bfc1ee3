// The database of the local runtimes (`npm start`, `npm run serve`): a `corq` database on the
// embedded server, and what tells the runtime it is local.
import pg from "pg";

/**
 * What tells the Worker (or `npm run serve`) it runs in this local stack (from configuration, never from a Host
 * header): `CORQ_LOCAL` (the dashboard's Host allowlist, short admin tokens allowed) and
 * `CORQ_PUSH_ALLOW_PRIVATE` (push deliveries may go to private addresses such as 127.0.0.1,
 * where local receivers listen); and `CORQ_MAX_SUBREQUESTS` as on a Paid plan (10,000: the
 * deployed default, 50, is the Free plan's). `options.vars` can override each.
 */
export const localVars = {
  CORQ_LOCAL: "true",
  CORQ_PUSH_ALLOW_PRIVATE: "true",
  CORQ_MAX_SUBREQUESTS: "10000",
} as const;

/** The URL of database `name` on the server at `serverUrl`, created if missing. */
export async function ensureDatabase(serverUrl: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: serverUrl });
  // before connect: a FATAL read with the ReadyForQuery is emitted before `await` resumes (src/db/guardPool.ts);
  // the statement after it fails instead
  client.on("error", () => undefined);
  await client.connect();
  try {
    const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The URL with its password masked, for logs. */
export function redact(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = "***";
  return u.toString();
}
