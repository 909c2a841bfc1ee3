import pg from "pg";
import { randomBytes } from "node:crypto";

/** A fresh database on the benchmark's Postgres, so every run starts from empty tables. */
export async function freshDatabase(serverUrl: string, prefix: string): Promise<string> {
  const name = `bench_${prefix}_${randomBytes(4).toString("hex")}`;
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropDatabase(serverUrl: string, databaseUrl: string) {
  const name = new URL(databaseUrl).pathname.slice(1);
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await client.end();
}
