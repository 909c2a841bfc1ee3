import { afterEach, inject } from "vitest";
import pg from "pg";
import { createCorq, type Corq, type CorqOptions } from "../../src/index.js";
import { createTestDatabase } from "./database.js";

/**
 * Per-test corq instances, each on a fresh migrated database (dropped after the test).
 * `open(options)` returns the instance, its database URL and a raw pg pool for assertions.
 */
export function useCorq() {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  return async function open(options: Omit<CorqOptions, "databaseUrl"> = {}) {
    const database = await createTestDatabase(inject("postgresUrl"));
    cleanups.push(database.drop);
    const corq = createCorq({ databaseUrl: database.url, ...options });
    const raw = new pg.Pool({ connectionString: database.url, max: 4 });
    cleanups.push(() => corq.close(), () => raw.end());
    await corq.migrate();
    const another = (more: Omit<CorqOptions, "databaseUrl"> = options) => {
      const instance = createCorq({ databaseUrl: database.url, ...more });
      cleanups.push(() => instance.close());
      return instance;
    };
    return { corq, url: database.url, raw, another };
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
