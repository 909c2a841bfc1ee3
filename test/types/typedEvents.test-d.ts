// Type-level tests of typed events (docs/typed-events.md). Never run: type-checked by
// `npm run typecheck` (tsconfig includes test/) and by test/types/typecheck.test.ts in the
// suite. Each `@ts-expect-error` must meet an error: one that does not is itself an error.
import { expectTypeOf } from "vitest";
import { z } from "zod";
import {
  createCorq,
  defineSubscription,
  type Corq,
  type DeliveredEvent,
  type DeliveredEventOf,
  type Delay,
  type EventInput,
  type EventsOf,
  type HandlerContext,
  type JsonInput,
  type StandardSchemaV1,
  type StoredEvent,
  type SubscriptionDefinition,
} from "../../src/index.js";
import { createWorker } from "../../functions/createWorker.js";
import { startServe } from "../../src/node/serve.js";

interface Shipment {
  order: string;
  carrier: { name: string; tracking?: string };
}

type Events = {
  OrderPlaced: { customer: string; total: number };
  OrderShipped: Shipment;
  OrderCancelled: { order: string; reason: string | null };
};

declare const corq: Corq<Events>;

// ---- without an event map: as before, and data typed by an interface is accepted
{
  const loose = createCorq({
    subscriptions: [
      {
        name: "any",
        events: ["Whatever"],
        key: "data.anything.at.all",
        handle(events, ctx) {
          expectTypeOf(events).toEqualTypeOf<DeliveredEvent[]>();
          expectTypeOf(events[0]!.name).toEqualTypeOf<string>();
          expectTypeOf(events[0]!.data).toEqualTypeOf<JsonInput>();
          expectTypeOf(events[0]!.seq).toEqualTypeOf<number>();
          expectTypeOf(ctx).toEqualTypeOf<HandlerContext>();
        },
      },
    ],
  });
  expectTypeOf(loose).toEqualTypeOf<Corq>();
  const shipment: Shipment = { order: "o-1", carrier: { name: "ups" } };
  void loose.append("s", [{ name: "AnyName", data: shipment, meta: { by: shipment } }]);
  // @ts-expect-error data is required
  void loose.append("s", [{ name: "AnyName" }]);
  // @ts-expect-error a bigint is never JSON
  void loose.append("s", [{ name: "AnyName", data: 1n }]);
  const keyFromElsewhere: string = "stream";
  const untyped: SubscriptionDefinition = { name: "x", key: keyFromElsewhere, handle() {} };
  expectTypeOf(untyped.events).toEqualTypeOf<readonly string[] | undefined>();
  const input: EventInput = { name: "X", data: shipment };
  expectTypeOf(input.name).toEqualTypeOf<string>();
  // a DeliveredEvent is still an interface-like object type an app may extend
  interface Audited extends DeliveredEvent {
    auditedBy: string;
  }
  expectTypeOf<Audited["seq"]>().toEqualTypeOf<number>();
}

// ---- appends checked against the map
{
  void corq.append("order-1", [{ name: "OrderPlaced", data: { customer: "ada", total: 3 } }]);
  const shipment: Shipment = { order: "order-1", carrier: { name: "ups" } };
  void corq.append("order-1", [{ name: "OrderShipped", data: shipment }]); // an interface: fine
  // @ts-expect-error a name the map does not have
  void corq.append("order-1", [{ name: "OrderPlacd", data: { customer: "ada", total: 3 } }]);
  // @ts-expect-error data of another event
  void corq.append("order-1", [{ name: "OrderPlaced", data: shipment }]);
  // @ts-expect-error a field of the wrong type
  void corq.append("order-1", [{ name: "OrderPlaced", data: { customer: "ada", total: "3" } }]);
  // @ts-expect-error a field too many (an object literal)
  void corq.append("order-1", [{ name: "OrderPlaced", data: { customer: "ada", total: 3, extra: 1 } }]);
  expectTypeOf<EventInput<Events, "OrderCancelled">>().toEqualTypeOf<
    {
      name: "OrderCancelled";
      data: { order: string; reason: string | null };
      meta?: Record<string, string | number | boolean | object | null>;
    } & Delay
  >();
  // a delay: deliverAt (text or a Date) or delayMs, never both
  void corq.append("order-1", [{ name: "OrderShipped", data: shipment, deliverAt: new Date() }]);
  void corq.append("order-1", [{ name: "OrderShipped", data: shipment, delayMs: 5000 }]);
  // @ts-expect-error deliverAt and delayMs together
  void corq.append("order-1", [{ name: "OrderShipped", data: shipment, delayMs: 5000, deliverAt: new Date() }]);
}

// ---- subscriptions inline in createCorq<Events>: names, keys, handlers checked
createCorq<Events>({
  subscriptions: [
    {
      name: "all-orders",
      events: ["OrderPlaced", "OrderShipped"],
      key: "data.order",
      handle(events, ctx) {
        expectTypeOf(events).toEqualTypeOf<DeliveredEvent<Events>[]>();
        for (const event of events) {
          if (event.name === "OrderShipped") expectTypeOf(event.data).toEqualTypeOf<Shipment>();
          if (event.name === "OrderPlaced") expectTypeOf(event.data.total).toEqualTypeOf<number>();
        }
        expectTypeOf(ctx.corq).toEqualTypeOf<Corq<Events>>();
      },
    },
    // @ts-expect-error a misspelt event name
    { name: "typo", events: ["OrderPlacd"], handle() {} },
    // @ts-expect-error a key path into no event's data
    { name: "bad-key", events: ["OrderPlaced"], key: "data.custmer", handle() {} },
    // @ts-expect-error a key that is neither stream, data nor meta
    { name: "bad-root", key: "dta.customer", handle() {} },
    { name: "meta-key", key: "meta.tenant", handle() {} },
    { name: "nested-key", key: "data.carrier.name", handle() {} },
    { name: "every", events: ["*"], handle() {} },
  ],
});

// ---- a subscription in a file of its own: the handler gets exactly the subscribed events
const shipping = defineSubscription<Events>()({
  name: "shipping",
  events: ["OrderShipped", "OrderCancelled"],
  key: "data.order",
  handle(events, { corq }) {
    expectTypeOf(events).toEqualTypeOf<DeliveredEvent<Events, "OrderShipped" | "OrderCancelled">[]>();
    const [first] = events;
    if (first?.name === "OrderCancelled") expectTypeOf(first.data.reason).toEqualTypeOf<string | null>();
    if (first?.name === "OrderShipped") {
      expectTypeOf(first).toEqualTypeOf<DeliveredEventOf<"OrderShipped", Shipment>>();
      expectTypeOf(first.data.carrier.name).toEqualTypeOf<string>();
    }
    // @ts-expect-error not a subscribed name: the comparison can never be true
    if (first?.name === "OrderPlaced") return;
    void corq.append("x", [{ name: "OrderCancelled", data: { order: "o", reason: null } }]);
  },
});
expectTypeOf(shipping).toEqualTypeOf<SubscriptionDefinition<Events, "OrderShipped" | "OrderCancelled">>();

defineSubscription<Events>()({
  name: "placed",
  events: ["OrderPlaced"],
  // @ts-expect-error only the subscribed events' data: OrderPlaced has no "order"
  key: "data.order",
  handle() {},
});

defineSubscription<Events>()({
  name: "by-function",
  events: ["OrderPlaced"],
  key: (event) => {
    expectTypeOf(event).toEqualTypeOf<StoredEvent<"OrderPlaced", Events["OrderPlaced"]>>();
    return event.data.customer;
  },
  handle() {},
});

// @ts-expect-error a misspelt name in a subscription of its own
defineSubscription<Events>()({ name: "typo", events: ["OrderShiped"], handle() {} });

// the names given explicitly
defineSubscription<Events, "OrderPlaced">({
  name: "explicit",
  events: ["OrderPlaced"],
  handle(events) {
    expectTypeOf(events[0]!.data).toEqualTypeOf<{ customer: string; total: number }>();
  },
});

// annotated handlers (the README's style) fit too
const annotated = defineSubscription<Events>()({
  name: "annotated",
  events: ["OrderPlaced"],
  async handle(events: DeliveredEvent<Events, "OrderPlaced">[], ctx: HandlerContext<Events>) {
    expectTypeOf(events[0]!.data.customer).toEqualTypeOf<string>();
    expectTypeOf(ctx.key).toEqualTypeOf<string>();
  },
});

// subscriptions of some events go in one list, for createCorq, createWorker and startServe alike
createCorq<Events>({ subscriptions: [shipping, annotated] });
createWorker<Events>({ subscriptions: [shipping, annotated] });
void startServe<Events>({ subscriptions: [shipping, annotated] });
type OtherEvents = { Other: { x: number } };
const other = defineSubscription<OtherEvents>()({ name: "other", events: ["Other"], key: "data.x", handle() {} });
// @ts-expect-error a subscription of another map
createCorq<Events>({ subscriptions: [other] });

// ---- schemas: any Standard Schema validator whose output is the declared data
const placedSchema = z.object({ customer: z.string().trim(), total: z.number().nonnegative() });
const handWritten: StandardSchemaV1<unknown, Events["OrderCancelled"]> = {
  "~standard": {
    version: 1,
    vendor: "hand",
    validate: (value) => ({ value: value as Events["OrderCancelled"] }),
  },
};
createCorq<Events>({
  schemas: { OrderPlaced: placedSchema, OrderCancelled: handWritten },
  subscriptions: [
    defineSubscription<Events>()({
      name: "validated",
      events: ["OrderPlaced"],
      schemas: { OrderPlaced: placedSchema },
      handle() {},
    }),
    defineSubscription<Events>()({
      name: "wrong-schema",
      events: ["OrderPlaced"],
      // @ts-expect-error the schema's output is not OrderPlaced's data
      schemas: { OrderPlaced: z.object({ customer: z.number() }) },
      handle() {},
    }),
    defineSubscription<Events>()({
      name: "schema-of-another-event",
      events: ["OrderPlaced"],
      // @ts-expect-error a schema for an event the subscription does not take
      schemas: { OrderCancelled: handWritten },
      handle() {},
    }),
  ],
});
// @ts-expect-error a schema for a name the map does not have
createCorq<Events>({ schemas: { OrderPlacd: placedSchema } });

// the map from the schemas, when they are where the types come from
const schemas = { Placed: placedSchema, Cancelled: z.object({ order: z.string() }) };
type FromSchemas = EventsOf<typeof schemas>;
expectTypeOf<FromSchemas["Placed"]>().toEqualTypeOf<{ customer: string; total: number }>();
createCorq<FromSchemas>({ schemas });

// typed and untyped fit each other where code is shared: a handler typed by the map called with
// an untyped context (a test), a typed subscription in an untyped list, a Corq<Events> passed on
declare const untypedContext: HandlerContext;
declare const untypedCorq: Corq;
void annotated.handle([], untypedContext);
export const typedFromUntyped: Corq<Events> = untypedCorq;
export const untypedFromTyped: Corq = corq;
export const untypedList: SubscriptionDefinition[] = [shipping, annotated];
