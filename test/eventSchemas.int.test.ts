// Runtime validation of delivered data by Standard Schema validators (src/eventSchemas.ts): an
// event whose data fails its schema fails its batch like a handler that throws — retried, dead
// after maxAttempts, the validator's messages its lastError — while the other keys flow; the
// handler gets what the schema outputs. On both paths (consume, drain), with zod and with a
// hand-written Standard Schema object (nothing ties corq to zod), sync and async.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createCorq, type Corq, type DeliveredEvent, type StandardSchemaV1 } from "../src/index.js";
import { createWorker } from "../functions/createWorker.js";
import { useCorq } from "./helpers/corq.js";
import { refused } from "./helpers/refused.js";
import { within } from "./helpers/until.js";

const open = useCorq();

type Placed = { customer: string; total: number; currency?: string };

// zod: `currency` gets a default, so the handler sees data the schema transformed
const zodPlaced = z.object({ customer: z.string(), total: z.number(), currency: z.string().default("EUR") });

// a Standard Schema by hand, async: no validator library at all
const handPlaced: StandardSchemaV1<unknown, Placed> = {
  "~standard": {
    version: 1,
    vendor: "hand-written",
    async validate(value) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      const data = value as Partial<Placed> | null;
      if (typeof data?.total !== "number") {
        return { issues: [{ message: "must be a number", path: [{ key: "total" }] }, { message: "checked by hand" }] };
      }
      return { value: { customer: String(data.customer), total: data.total, currency: "USD" } };
    },
  },
};

type Run = (corq: Corq, subscription: string) => Promise<void>;

// consume: one batch per call; drain: several keys per claim, settled with the next claim
const consumeAll: Run = async (corq, subscription) => {
  await corq.advance();
  for (let batches = 0; (await corq.consume(subscription)) !== null; batches++) {
    if (batches > 50) throw new Error("batches never ran out");
  }
};
const drainAll: Run = async (corq, subscription) => {
  await corq.advance();
  // backoff 0: a failed key is ready again at once; one drain takes it to dead
  await within(corq.drain(subscription, { budgetMs: 10_000 }), { timeoutMs: 15_000, message: "drain" });
};

describe.each([
  ["consume", "zod", consumeAll, zodPlaced, "EUR"],
  ["drain", "zod", drainAll, zodPlaced, "EUR"],
  ["consume", "a hand-written async schema", consumeAll, handPlaced, "USD"],
  ["drain", "a hand-written async schema", drainAll, handPlaced, "USD"],
] as const)("on the %s path, with %s", (_path, _validator, run, schema, currency) => {
  it.each([false, true])(
    "the key with invalid data dead-letters with the validator's message, the other flows with validated data (transactional: %s)",
    async (transactional) => {
      const seen: { key: string; data: unknown }[] = [];
      const { corq } = await open({
        subscriptions: [
          {
            name: "orders",
            events: ["OrderPlaced", "Noted"],
            key: "data.customer",
            maxAttempts: 2,
            backoff: { initialMs: 0, maxMs: 0 },
            transactional,
            schemas: { OrderPlaced: schema },
            handle(events: DeliveredEvent[], ctx) {
              for (const event of events) seen.push({ key: ctx.key, data: event.data });
            },
          },
        ],
      });
      await corq.append("order-1", [{ name: "OrderPlaced", data: { customer: "ada", total: 3 } }]);
      const { positions } = await corq.append("order-2", [
        { name: "OrderPlaced", data: { customer: "bob", total: "lots" } },
      ]);
      // an event without a schema passes as it is
      await corq.append("order-3", [
        { name: "Noted", data: { customer: "ada", note: 1 } },
        { name: "OrderPlaced", data: { customer: "ada", total: 4 } },
      ]);
      await run(corq, "orders");

      expect(seen).toEqual([
        { key: "ada", data: { customer: "ada", total: 3, currency } },
        { key: "ada", data: { customer: "ada", note: 1 } },
        { key: "ada", data: { customer: "ada", total: 4, currency } },
      ]);
      const bob = await corq.key("orders", "bob");
      expect(bob).toMatchObject({ status: "dead", attempts: 2 });
      const head = `EventDataInvalid: OrderPlaced at position ${positions[0]} (stream order-2) failed its schema: data.total: `;
      expect(bob.lastError?.startsWith(head), String(bob.lastError)).toBe(true);
      if (schema === handPlaced) expect(bob.lastError).toBe(`${head}must be a number; data: checked by hand`);
      const [dead, ...more] = await corq.deadLetters({ subscription: "orders" });
      expect(more).toEqual([]);
      expect(dead).toMatchObject({ key: "bob", position: positions[0], lastError: bob.lastError });
      expect(await corq.key("orders", "ada")).toMatchObject({ status: "idle", attempts: 0, pending: 0 });
    },
  );
});

describe("schemas shared by createCorq", () => {
  it("apply to every subscription that takes the name; a subscription's own win", async () => {
    const seen: Record<string, unknown[]> = { plain: [], own: [], other: [] };
    const collect = (name: string) => (events: DeliveredEvent[]) => {
      seen[name]?.push(...events.map((e) => e.data));
    };
    const strict = z.object({ customer: z.string(), total: z.number() }).transform((d) => ({ ...d, by: "own" }));
    const { corq } = await open({
      schemas: { OrderPlaced: zodPlaced },
      subscriptions: [
        { name: "plain", events: ["OrderPlaced"], handle: collect("plain") },
        { name: "own", schemas: { OrderPlaced: strict }, handle: collect("own") },
        { name: "other", events: ["Noted"], handle: collect("other") },
      ],
    });
    await corq.append("s", [
      { name: "OrderPlaced", data: { customer: "ada", total: 1 } },
      { name: "Noted", data: { total: "not checked" } },
    ]);
    for (const name of ["plain", "own", "other"]) await consumeAll(corq, name);
    expect(seen).toEqual({
      plain: [{ customer: "ada", total: 1, currency: "EUR" }],
      own: [{ customer: "ada", total: 1, by: "own" }, { total: "not checked" }],
      other: [{ total: "not checked" }],
    });
  });
});

describe("schemas are checked when the subscriptions are", () => {
  const handle = () => undefined;
  it.each([
    ["a schema for a name the subscription does not take", { OrderPlacd: zodPlaced }, /does not take "OrderPlacd"/],
    ["something that is not a validator", { OrderPlaced: { parse: () => 1 } }, /must be a Standard Schema/],
    ["not an object", [zodPlaced], /must be an object/],
  ])("refuses %s (createCorq and createWorker alike)", (_, schemas, reason) => {
    const subscriptions = [{ name: "s", events: ["OrderPlaced"], schemas, handle }] as never;
    const error = refused(() => createCorq({ databaseUrl: "postgres://x", subscriptions }));
    expect(error).toMatchObject({ code: "invalid_config" });
    expect(error.message).toMatch(/^subscriptions\[0\]\.schemas/);
    expect(error.message).toMatch(reason);
    expect(refused(() => createWorker({ subscriptions })).message).toMatch(reason);
  });

  it("refuses shared schemas that are not validators (createCorq and createWorker alike)", () => {
    const schemas = { OrderPlaced: "zod" } as never;
    const subscriptions = [{ name: "s", handle }];
    expect(refused(() => createCorq({ databaseUrl: "postgres://x", subscriptions, schemas })).message).toMatch(
      /^schemas\.OrderPlaced must be a Standard Schema/,
    );
    expect(refused(() => createWorker({ subscriptions, schemas })).message).toMatch(/^schemas\.OrderPlaced/);
  });
});
