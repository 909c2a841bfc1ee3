import { afterEach, inject } from "vitest";
import pg from "pg";
import { createCorq, type Corq, type CorqOptions } from "../../src/index.js";
import { createTestDatabase } from "./database.js";

/**
 * Per-test corq instances, each on a fresh migrated database (dropped after the test).
 * `open(options)` returns the instance, its database URL, a raw pg pool for assertions,
 * `another(options)` for more instances on the same database, and `dispose()` to close and
 * drop it all right away (property tests open one per run).
 */
export function useCorq() {
  const pending = new Set<() => Promise<void>>();
  afterEach(async () => {
    for (const dispose of [...pending]) await dispose();
  });

  return async function open(options: Omit<CorqOptions, "databaseUrl"> = {}) {
    const database = await createTestDatabase(inject("postgresUrl"));
    const instances: Corq[] = [];
    const raw = new pg.Pool({ connectionString: database.url, max: 4 });
    // dropping the database (WITH FORCE) ends its idle clients: not an error of the test
    raw.on("error", () => undefined);
    const dispose = async () => {
      pending.delete(dispose);
      await Promise.all(instances.map((instance) => instance.close()));
      await raw.end();
      await database.drop();
    };
    pending.add(dispose);
    const another = (more: Omit<CorqOptions, "databaseUrl"> = options) => {
      const instance = createCorq({ databaseUrl: database.url, ...more });
      instances.push(instance);
      return instance;
    };
    const corq = another(options);
    await corq.migrate();
    return { corq, url: database.url, raw, another, dispose };
  };
}

export type Opened = Awaited<ReturnType<ReturnType<typeof useCorq>>>;

/** Advances, then consumes until nothing is ready; returns the number of batches consumed. */
export async function drain(corq: Corq, subscription: string, maxBatches = 10_000): Promise<number> {
  await corq.advance();
  let batches = 0;
  while (batches < maxBatches && (await corq.consume(subscription)) !== null) batches++;
  return batches;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
