// Events as a handler gets them, built for a unit test: every field a DeliveredEvent has, from
// defaults that look like what corq hands over (seq 1, 2, 3 … per key, versions per stream, one
// clock), each one overridable. Pure functions: the same call gives the same events.
import type { AnyEvents, DeliveredEvent, DeliveredEventOf, EventMap, EventName } from "../types.js";

/**
 * What a test writes for one event: its name, and any field to set instead of the default. With
 * the app's event map (`deliveredEvents<Events, "OrderPlaced">(…)`) the name and data are checked
 * and the events are typed as the subscription's handler takes them.
 */
export type EventSpec<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>> = N extends unknown
  ? Partial<Omit<DeliveredEventOf<N, E[N]>, "name" | "data">> & { name: N; data?: E[N] }
  : never;

/** The builders' clock: events are created from here on, one second apart (override with `startAt`). */
export const TEST_EPOCH = "2026-01-01T00:00:00.000Z";

export interface DeliveredEventsOptions {
  /** The stream of every event without a `stream` of its own (default: the key, as with `key: "stream"`). */
  stream?: string;
  /** seq of the first event (default 1): a batch after an earlier one of the same key starts higher. */
  firstSeq?: number;
  /** position of the first event (default 1); the next ones follow by 1. */
  firstPosition?: number;
  /** version of each stream's first event (default 0); each stream counts on by 1. */
  firstVersion?: number;
  /** createdAt of the first event (default TEST_EPOCH); the next ones follow by `stepMs`. */
  startAt?: string | Date;
  /** Milliseconds between two events' createdAt (default 1000). */
  stepMs?: number;
}

/**
 * One key's batch as corq would deliver it, in order: seq `firstSeq`, `firstSeq + 1` …; positions
 * ascending; versions counted per stream (events with a `stream` of their own count apart);
 * createdAt one `stepMs` apart; `data` `{}`, `meta` `{}`, `replay` false. Any field an event spec
 * sets wins.
 */
export function deliveredEvents<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>>(
  key: string,
  specs: EventSpec<E, N>[],
  options: DeliveredEventsOptions = {},
): DeliveredEvent<E, N>[] {
  const start = Date.parse(new Date(options.startAt ?? TEST_EPOCH).toISOString());
  const stepMs = options.stepMs ?? 1000;
  const versions = new Map<string, number>();
  return specs.map((spec, index) => {
    const stream = spec.stream ?? options.stream ?? key;
    const version = versions.get(stream) ?? options.firstVersion ?? 0;
    versions.set(stream, version + 1);
    return {
      position: (options.firstPosition ?? 1) + index,
      stream,
      version,
      data: {},
      meta: {},
      createdAt: new Date(start + index * stepMs).toISOString(),
      seq: (options.firstSeq ?? 1) + index,
      replay: false,
      ...spec,
      // a spec without data gets {}: the builder's default, whatever the map says
    } as DeliveredEvent<E, N>;
  });
}

/** One event as a handler gets it: the first of a batch of its stream (`test-stream` unless set). */
export function deliveredEvent<E extends EventMap = AnyEvents, N extends EventName<E> = EventName<E>>(
  spec: EventSpec<E, N>,
): DeliveredEvent<E, N> {
  const [event] = deliveredEvents<E, N>(spec.stream ?? "test-stream", [spec]);
  if (event === undefined) throw new Error("deliveredEvent: one spec gives one event");
  return event;
}
