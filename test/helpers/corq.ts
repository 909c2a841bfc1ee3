import { afterEach, inject } from "vitest";
import pg from "pg";
import type { Corq, CorqOptions } from "../../src/index.js";
import { createCorqRuntime, type CorqRuntime } from "../../src/internal.js";
import { createTestDatabase } from "./database.js";
import { within } from "./until.js";

/**
 * Per-test corq instances, each on a fresh migrated database (dropped after the test), with the
 * runtimes' machinery (src/internal.ts: consumer slots, kicks), which some tests drive.
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
    const instances: CorqRuntime[] = [];
    const raw = new pg.Pool({ connectionString: database.url, max: 4 });
    // dropping the database (WITH FORCE) ends its idle clients: not an error of the test
    raw.on("error", () => undefined);
    const dispose = async () => {
      pending.delete(dispose);
      // a failed test may leave a client checked out (a held transaction, a statement waiting on
      // its lock): closing would wait for it forever; the drop below ends those connections
      await within(Promise.all([...instances.map((instance) => instance.close()), raw.end()]), {
        timeoutMs: 5000,
        message: "closing the test's connections",
      }).catch((error: unknown) => console.warn(String(error)));
      await database.drop();
    };
    pending.add(dispose);
    const another = (more: Omit<CorqOptions, "databaseUrl"> = options) => {
      const instance = createCorqRuntime({ databaseUrl: database.url, ...more });
      instances.push(instance);
      return instance;
    };
    const corq = another(options);
    await corq.migrate();
    return { corq, url: database.url, raw, another, dispose };
  };
}

export type Opened = Awaited<ReturnType<ReturnType<typeof useCorq>>>;

/**
 * Advances, then consumes until nothing is ready; returns the number of batches consumed.
 * Fails (rather than hangs) when a key never runs out of batches or a claim never returns.
 */
export async function drain(
  corq: Corq,
  subscription: string,
  options: { maxBatches?: number; timeoutMs?: number } = {},
): Promise<number> {
  const maxBatches = options.maxBatches ?? 1000;
  const consumeAll = async () => {
    await corq.advance();
    let batches = 0;
    while ((await corq.consume(subscription)) !== null) {
      if (++batches >= maxBatches) throw new Error(`"${subscription}" still had batches ready after ${maxBatches}`);
    }
    return batches;
  };
  return within(consumeAll(), {
    timeoutMs: options.timeoutMs ?? 15_000,
    message: `draining "${subscription}" did not finish`,
  });
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
