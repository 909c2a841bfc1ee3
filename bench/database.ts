import pg from "pg";
import { randomBytes } from "node:crypto";

// Every connection the benchmark opens listens for 'error'. The server ends connections on its
// own (`DROP DATABASE … WITH (FORCE)` between runs, a shutdown: "terminating connection due to
// administrator command"); without a listener that event is an uncaught exception and ends
// the whole run.
const ignore = () => undefined;

/** A node-postgres pool whose idle and checked-out clients may lose their connection safely. */
export function benchPool(connectionString: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString, max });
  pool.on("error", ignore); // an idle client: the pool drops it
  pool.on("connect", (client) => client.on("error", ignore)); // a checked-out client: its next query fails
  return pool;
}

/** A connected node-postgres client, with an 'error' listener. */
export async function benchClient(connectionString: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString });
  client.on("error", ignore);
  await client.connect();
  return client;
}

/** A fresh database on the benchmark's Postgres, so every run starts from empty tables. */
export async function freshDatabase(serverUrl: string, prefix: string): Promise<string> {
  const name = `bench_${prefix}_${randomBytes(4).toString("hex")}`;
  const client = await benchClient(serverUrl);
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropDatabase(serverUrl: string, databaseUrl: string) {
  const name = new URL(databaseUrl).pathname.slice(1);
  const client = await benchClient(serverUrl);
  await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await client.end();
}
