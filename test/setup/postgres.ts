// Global setup: one Postgres for the whole run (embedded unless DATABASE_URL is set) and a
// migrated template database; each test file clones it into a database of its own.
import type { TestProject } from "vitest/node";
import pg from "pg";
import { startEmbeddedPostgres, type RunningPostgres } from "../../infra/embeddedPostgres.js";
import { createCorq } from "../../src/index.js";
import { TEMPLATE_DATABASE, databaseUrl } from "../helpers/database.js";

declare module "vitest" {
  export interface ProvidedContext {
    postgresUrl: string;
  }
}

let embedded: RunningPostgres | undefined;

export async function setup(project: TestProject) {
  let url = process.env.DATABASE_URL;
  if (!url) {
    // A throwaway cluster: durability settings off, it is deleted after the run.
    embedded = await startEmbeddedPostgres({ settings: { fsync: "off", synchronous_commit: "off", full_page_writes: "off" } });
    url = embedded.url;
  }
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE_DATABASE} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${TEMPLATE_DATABASE}`);
  } finally {
    await admin.end();
  }
  const corq = createCorq({ databaseUrl: databaseUrl(url, TEMPLATE_DATABASE) });
  await corq.migrate();
  await corq.close();
  project.provide("postgresUrl", url);
}

export async function teardown() {
  await embedded?.stop();
}
