// A code subscription as the app defines it (createCorq's `subscriptions`, defineSubscription):
// what it takes, how its events are keyed, its limits, and its handler.
import type { AnyEvents, DeliveredEvent, EventMap, EventName, EventOf, EventSchemas } from "./events.js";
import type { KeyPath } from "./keyPaths.js";
import type { HandlerContext, HandlerResult } from "./handler.js";

/**
 * Computes the correlation key of an event in JS; null/undefined = the event does not match.
 * (Declared through a method so that a key function of some events fits a subscription of more:
 * parameters of methods are compared both ways.)
 */
export type KeyFunction<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>> = {
  key(event: EventOf<E, N>): string | null | undefined;
}["key"];

/**
 * A code subscription. With an event map E (createCorq<E>, defineSubscription<E>()), `events`
 * must be names of E, `key` a path into their data, and the handler gets DeliveredEvent<E, N>:
 * a union over the subscribed names N.
 */
export interface SubscriptionDefinition<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>> {
  name: string;
  /** The event names it takes; ["*"] (the default): every name. */
  events?: readonly (N | "*")[];
  /**
   * Only events of streams whose name starts with one of these prefixes (exact prefixes, 1–100);
   * left out: every stream. The subscription-side half of an append token's `streamPrefix`: a
   * producer limited to `orders-` still makes every subscription that takes `orders-` streams run.
   */
  streams?: string[];
  /** "stream" (default), a path into data or meta ("data.customer"), or a function of the event. */
  key?: KeyPath<E, N> | KeyFunction<E, N>;
  /**
   * Standard Schema validators by event name (zod, valibot, arktype …): each delivered event's
   * data is checked (and transformed) before the handler sees it; data that fails fails the
   * batch with the validator's messages, like a handler that throws. Over createCorq's `schemas`.
   */
  schemas?: EventSchemas<E, N>;
  from?: "beginning" | "now";
  batchSize?: number;
  maxAttempts?: number;
  leaseMs?: number;
  backoff?: { initialMs?: number; maxMs?: number; factor?: number };
  /**
   * At most this many keys of the subscription in flight (leased) at once, across every
   * consumer, process and isolate — a downstream that takes n parallel writers. Keys over the
   * cap wait, ready, without an attempt counted (docs/flow-control.md). Default: no cap.
   */
  maxLeasedKeys?: number | null;
  /**
   * Fairness between tenants: each key's tenant, named like `key` ("stream", a path such as
   * "data.tenant", or a function — then `key` must be a function too), fixed by the event that
   * made the key's row. Claims share the consumers round robin between the tenants with ready
   * keys, least recently served first, each tenant's oldest key first (docs/flow-control.md).
   * Default: none (the oldest ready key first, whoever it belongs to).
   */
  tenant?: KeyPath<E, N> | KeyFunction<E, N> | null;
  /** Keys per round for a tenant (default 1): `{ "big-customer": 3 }`. */
  tenantWeights?: Record<string, number> | null;
  /**
   * At most this many keys of each tenant in flight (leased) at once, across every consumer,
   * process and isolate (needs `tenant`). Default: no cap.
   */
  maxLeasedKeysPerTenant?: number | null;
  /**
   * No window of `perMs` sees more than `events` deliveries start, for each key, each tenant, or
   * the whole subscription (`by`), across every consumer, process and isolate: one every
   * `perMs / events`; `burst` (1..events, default 1) lets that many start at once, a window still
   * seeing at most `events`. Over it, keys wait — no failure, no attempt counted
   * (docs/flow-control.md). Default: no limit.
   */
  rateLimit?: { events: number; perMs: number; by: "key" | "tenant" | "subscription"; burst?: number } | null;
  /**
   * An event's delay (deliverAt / delayMs) above this is capped at it for this subscription:
   * its key waits no longer (0 to 366 days, in ms). Applied when the subscription advances the
   * event, never at the append (another subscription may allow more): with a key reachable
   * through several stream prefixes, a producer of any of them can delay the key this long.
   * Default: a day (86,400,000).
   */
  maxDelayMs?: number;
  /**
   * The handler's writes through `ctx.tx` (and `ctx.run`) commit in the same transaction as the
   * ack of its batch: effects exactly once. Each such batch holds one connection (on Workers and
   * with driver "neon-http": a session opened for it) from the handler's start to its commit.
   * Default false: the handler runs outside any transaction and corq holds nothing open.
   */
  transactional?: boolean;
  // a method, not a property: a subscription of some events fits a list of subscriptions of more
  handle(events: DeliveredEvent<E, N>[], context: HandlerContext<E>): Promise<HandlerResult> | HandlerResult;
}
