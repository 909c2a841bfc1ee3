// The events of the log: what an append takes and returns, what the log and a handler hold —
// typed by the app's event map when it declares one (docs/typed-events.md), loose JSON when not.
import type { StandardSchemaV1 } from "./standardSchema.js";

export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/**
 * Event data where no event map types it: JSON, checked when appended (a value that is not — a
 * Date, a function, NaN — is refused then). `object` rather than `Json` so that a value typed by
 * an interface fits (interfaces have no index signature, so they never fit `Json`), and so that
 * a subscription typed by a map fits where an untyped one is expected.
 */
export type JsonInput = string | number | boolean | null | object;

/**
 * The app's events, name → the type of its data, declared once:
 * `type Events = { OrderPlaced: Order; OrderShipped: { order: string } }` (interfaces fine).
 * Pass it as the type argument of createCorq, createWorker, startServe, defineSubscription.
 * The log itself is untyped: reads (readStream, readLog) give StoredEvent; schemas check data at
 * run time.
 */
export type EventMap = object;

/** The event map without a declaration: any name, JSON data. */
export type AnyEvents = Record<string, JsonInput>;

/** The event names of a map: `string` for AnyEvents. */
export type EventName<E extends EventMap> = keyof E & string;

/** An event as stored in the log; `StoredEvent<"OrderPlaced", Order>` as a typed key function gets it. */
export interface StoredEvent<Name extends string = string, Data = JsonInput> {
  position: number;
  stream: string;
  version: number;
  name: Name;
  data: Data;
  meta: Record<string, Json>;
  createdAt: string; // ISO 8601
  /** Set when the event was appended with deliverAt or delayMs: not delivered before then. */
  deliverAt?: string;
}

/**
 * One delivered event of one name (a member of DeliveredEvent<Events>): with its `seq`, the
 * number of its queue entry within (subscription, key) — 1, 2, 3 … in log order, never reused —
 * so "seq <= last seen" drops true duplicates. `replay`: queued again by a rewind (with a new,
 * higher seq).
 */
export interface DeliveredEventOf<Name extends string = string, Data = JsonInput> extends StoredEvent<Name, Data> {
  seq: number;
  replay: boolean;
}

/**
 * An event as a handler (or a push receiver) gets it. With an event map, a union over the
 * subscribed names: `if (event.name === "OrderPlaced")` narrows `event.data`. Without one,
 * any name and JSON data.
 */
export type DeliveredEvent<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>> = N extends unknown
  ? DeliveredEventOf<N, E[N]>
  : never;

/** A stored event of one of the names N of map E (a union, like DeliveredEvent). */
export type EventOf<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>> = N extends unknown
  ? StoredEvent<N, E[N]>
  : never;

/** What an append takes: with an event map, a known name with its data's type. */
export type EventInput<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>> = {
  [K in N]: { name: K; data: E[K]; meta?: Record<string, JsonInput> } & Delay;
}[N];

/**
 * When an event may be delivered (docs/flow-control.md): not before `deliverAt` (ISO 8601 with
 * an offset, or a Date), or `delayMs` after the append — at most 366 days ahead; a past time
 * delivers at once. One or the other. The key's later events wait behind it (order is kept);
 * other keys are not held up.
 */
export type Delay = { deliverAt?: string | Date; delayMs?: never } | { delayMs?: number; deliverAt?: never };

/**
 * Runtime checks of delivered data by event name: any Standard Schema validator (zod 4,
 * valibot, arktype, …). Data that fails fails its batch (retried, dead after maxAttempts) with
 * the validator's messages; what the schema outputs is what the handler gets.
 */
export type EventSchemas<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>> = {
  [K in N]?: StandardSchemaV1<unknown, E[K]>;
};

/** The event map a set of schemas describes: `type Events = EventsOf<typeof schemas>`. */
export type EventsOf<S extends Record<string, StandardSchemaV1>> = {
  [K in keyof S]: StandardSchemaV1.InferOutput<S[K]>;
};

export type { StandardSchemaV1 };

export interface AppendResult {
  stream: string;
  /** The stream's last version after the append. */
  version: number;
  /** The global position of each appended event, in input order. */
  positions: number[];
  /** An idempotent append's repeat: what the first append with its key answered; nothing was written. */
  replayed?: true;
}
