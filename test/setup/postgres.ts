// Global setup: one Postgres for the whole run (embedded unless DATABASE_URL is set) and a
// migrated template database; each test file clones it into a database of its own.
import type { TestProject } from "vitest/node";
import pg from "pg";
import { startEmbeddedPostgres, type RunningPostgres } from "../../cli/dev/embeddedPostgres.js";
import { createCorq } from "../../src/index.js";
import { TEMPLATE_DATABASE, databaseUrl } from "../helpers/database.js";

declare module "vitest" {
  export interface ProvidedContext {
    postgresUrl: string;
  }
}

// Both test projects (vitest.config.ts) run this setup in the one main process: one cluster
// for both, stopped by the last teardown.
const shared = globalThis as { corqPostgres?: { url: Promise<string>; embedded?: RunningPostgres; users: number } };

export async function setup(project: TestProject) {
  shared.corqPostgres ??= { url: start(), users: 0 };
  shared.corqPostgres.users++;
  project.provide("postgresUrl", await shared.corqPostgres.url);
}

async function start(): Promise<string> {
  let url = process.env.DATABASE_URL;
  if (!url) {
    // A throwaway cluster: durability settings off, it is deleted after the run.
    const embedded = await startEmbeddedPostgres({
      settings: { fsync: "off", synchronous_commit: "off", full_page_writes: "off" },
    });
    shared.corqPostgres!.embedded = embedded;
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
  return url;
}

export async function teardown() {
  const state = shared.corqPostgres;
  if (!state || --state.users > 0) return;
  shared.corqPostgres = undefined;
  await state.embedded?.stop();
}
