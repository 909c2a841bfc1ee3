// Three cells for the cells tests (CLARIFICATIONS, "Cells"): three separate Postgres clusters,
// not three databases of one (one cluster shares one xmin horizon). Cell "one" is on the suite's
// server (DATABASE_URL's Postgres when it is set: the major CI runs on), "two" and "three" on
// embedded clusters of their own on free ports. `databases()` gives each test fresh databases.
import pg from "pg";
import { afterAll, beforeAll, inject } from "vitest";
import { randomBytes } from "node:crypto";
import { startEmbeddedPostgres, type RunningPostgres } from "../../cli/dev/embeddedPostgres.js";
import { createTestDatabase, databaseUrl } from "./database.js";

export type CellUrls = Record<"one" | "two" | "three", string>;

export interface ThreeCells {
  /** A fresh, empty database in each cluster. */
  databases(): Promise<CellUrls>;
  /** The embedded clusters, to stop and start (cell "one" is the suite's server). */
  clusters: { two: RunningPostgres; three: RunningPostgres };
  close(): Promise<void>;
}

export async function startThreeCells(serverUrl: string): Promise<ThreeCells> {
  const [two, three] = await Promise.all(
    [0, 1].map(() => startEmbeddedPostgres({ settings: { fsync: "off", synchronous_commit: "off" } })),
  );
  const dropOnOne: (() => Promise<void>)[] = [];
  const create = async (server: RunningPostgres) => {
    const name = `corq_cell_${randomBytes(5).toString("hex")}`;
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${name}`);
    } finally {
      await admin.end();
    }
    return databaseUrl(server.url, name);
  };
  return {
    async databases() {
      const one = await createTestDatabase(serverUrl, { migrated: false });
      dropOnOne.push(one.drop);
      return { one: one.url, two: await create(two!), three: await create(three!) };
    },
    clusters: { two: two!, three: three! },
    async close() {
      await Promise.allSettled([...dropOnOne.map((drop) => drop()), two!.stop(), three!.stop()]);
    },
  };
}

/** The three clusters for one test file: started before its tests (they take seconds), stopped after. */
export function useThreeCells(): Omit<ThreeCells, "close"> {
  let started: ThreeCells | undefined;
  beforeAll(async () => {
    started = await startThreeCells(inject("postgresUrl"));
  }, 120_000);
  afterAll(async () => {
    await started?.close();
  });
  const running = () => {
    if (!started) throw new Error("the three cells are not started: call useThreeCells() at the file's top level");
    return started;
  };
  return {
    databases: () => running().databases(),
    get clusters() {
      return running().clusters;
    },
  };
}
