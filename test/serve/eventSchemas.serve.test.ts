// Event schemas on the Node runtime: startServe's shared `schemas` reach the consumers its loop
// runs — an event its schema refuses dead-letters its key with the validator's message, the
// other key's handler gets the schema's output (test/eventSchemas.int.test.ts: the library).
import { afterEach, describe, expect, inject, it } from "vitest";
import { z } from "zod";
import { createCorq, type Corq, type DeliveredEvent } from "../../src/index.js";
import { startServe, type RunningServe } from "../../src/node/serve.js";
import { createTestDatabase } from "../helpers/database.js";
import { eventually } from "../helpers/until.js";

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

describe("startServe with schemas", () => {
  it("validates what its consumers deliver: the invalid key dead-letters alone, the other gets the schema's output", async () => {
    const database = await createTestDatabase(inject("postgresUrl"));
    cleanup.push(() => database.drop());
    const seen: { key: string; data: unknown }[] = [];
    const running: RunningServe = await startServe({
      subscriptions: [
        {
          name: "orders",
          events: ["OrderPlaced"],
          key: "data.customer",
          maxAttempts: 2,
          backoff: { initialMs: 0, maxMs: 0 },
          handle(events: DeliveredEvent[], ctx) {
            for (const event of events) seen.push({ key: ctx.key, data: event.data });
          },
        },
      ],
      schemas: {
        OrderPlaced: z.object({ customer: z.string(), total: z.number(), currency: z.string().default("EUR") }),
      },
      env: { DATABASE_URL: database.url, CORQ_ADMIN_TOKEN: "a".repeat(32) },
      port: 0,
      role: "worker",
      log: () => undefined,
    });
    cleanup.push(() => running.stop());
    const corq: Corq = createCorq({ databaseUrl: database.url, notify: true });
    cleanup.push(() => corq.close());
    await corq.append("order-1", [{ name: "OrderPlaced", data: { customer: "ada", total: 3 } }]);
    await corq.append("order-2", [{ name: "OrderPlaced", data: { customer: "bob", total: "lots" } }]);
    await eventually(async () => {
      expect(await corq.key("orders", "bob")).toMatchObject({ status: "dead", attempts: 2 });
      expect(seen).toEqual([{ key: "ada", data: { customer: "ada", total: 3, currency: "EUR" } }]);
    });
    expect((await corq.key("orders", "bob")).lastError).toMatch(
      /^EventDataInvalid: OrderPlaced at position \d+ \(stream order-2\) failed its schema: data\.total: /,
    );
  });
});
